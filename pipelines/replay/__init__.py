"""``gpuplan replay``: the replayed openb week and the export writers it prints each day (writers are not sources).

- :mod:`pipelines.replay.week`: the daily cycle (write the day's exports, retrain, replan) for N days;
- :mod:`pipelines.replay.day`: one day's export time and the text of every export at it;
- :mod:`pipelines.replay.jobs`: the replayed job table (columns, checks, each job's state at T);
- :mod:`pipelines.replay.slurm_exports`, :mod:`pipelines.replay.kueue_exports`,
  :mod:`pipelines.replay.prometheus_exports`: the writers, the inverse of :mod:`pipelines.workspace.sources`.
"""
