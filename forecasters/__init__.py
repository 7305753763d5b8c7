"""Forecasters (pure: no files, MLflow or Prefect).

Job kinds (training, quantization, batch inference; :data:`domain.JOB_KINDS`), see :mod:`forecasters.jobs`:

* ``forecasters.jobs.fit(kind, history) -> JobModel``; ``predict(model, jobs)``;
  ``predict_for_sizes(model, jobs, sizes)``; ``evaluate(model, holdout)``; ``time_split``;
  ``duration_steps(hours, step_minutes)``; ``clip_to_step``. The package splits into
  ``features``, ``priors``, ``model``, ``fitting``, ``steps``, ``baselines``, ``evaluation``.
* ``forecasters.schema``: feature lists per kind (``TRAINING_FEATURES`` ...), fixed versioned levels.
* ``forecasters.workloads``: the physics of each kind (``training``, ``quantization``,
  ``batch_inference``: ``sample_features``, ``simulate``, ``analytic_duration_h``, ``gpus_used``,
  ``memory_gpus``) and the GPU datasheet table they share (``hardware``); ``kind_module(kind)``.
* ``forecasters.generators.generate_history(kind, n, seed)`` / ``generate_queue(kind, n, seed, now)``.

Real-time inference: :mod:`forecasters.realtime`.
"""
