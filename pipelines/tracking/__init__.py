"""MLflow tracking for gpuplan: one experiment per forecaster, one for plans, one for benchmarks.

All MLflow code of the pipelines is in this folder:

- :mod:`pipelines.tracking.store`: the experiments, opening the store once (:func:`~pipelines.tracking.store.init_store`),
  one-line diagnoses of a broken store;
- :mod:`pipelines.tracking.runs`: one generic run (:func:`~pipelines.tracking.runs.log_run`), run names and links,
  finished runs read back, the plan and benchmark runs;
- :mod:`pipelines.tracking.forecast_runs`: the real-time forecast's profile and backtest runs;
- :mod:`pipelines.tracking.models`: logging and registering the job and scheduler forecasters.
"""
