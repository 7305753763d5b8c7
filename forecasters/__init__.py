"""Forecasters (pure: no files, MLflow or Prefect).

Job kinds (training, quantization, batch inference), see :mod:`forecasters.jobs`:

* ``forecasters.jobs.fit(kind, history) -> JobModel``; ``predict(model, jobs)``;
  ``predict_for_sizes(model, jobs, sizes)``; ``evaluate(model, holdout)``; ``time_split``;
  ``duration_steps(hours, step_minutes)``; ``clip_to_step``.
* ``forecasters.schema``: feature lists per kind (``TRAINING_FEATURES`` ...), fixed versioned levels.
* ``forecasters.generators.generate_history(kind, n, seed)`` / ``generate_queue(kind, n, seed, now)``;
  ``kind_module(kind)`` gives the physics (``analytic_duration_h``, ``gpus_used``, ``memory_gpus``).

Real-time inference: :mod:`forecasters.realtime`.
"""
