"""The stages of the main job: plain functions on in-memory values (no file IO, no tracking).

- :mod:`pipelines.stages.realtime`: ingest traffic, fit the weekly profiles and the
  last-day bands, the GPU demand frame, the real-time backtest report;
- :mod:`pipelines.stages.traffic`: traffic samples -> each service's hourly rows;
- :mod:`pipelines.stages.queue`: the current queue, one module per side of the seam in
  :mod:`pipelines.flows.jobs`: ``shipped`` (real-trace pods + generated LLM jobs) and ``store`` (an
  operator's exports: kinds, priorities, the scheduler forecaster's quantiles, input freshness);
- :mod:`pipelines.stages.models`: train, evaluate and apply the job forecasters;
- :mod:`pipelines.stages.problem`: forecasts -> a validated :class:`optimizer.problem.Problem`;
- :mod:`pipelines.stages.solve`: plan the problem and verify the plan;
- :mod:`pipelines.stages.outputs`: plan tables, planned metrics, the run summary;
- :mod:`pipelines.stages.whatif`: a what-if on a run folder (load the base run, edit, re-plan, compare);
  its command-line edits are parsed by :mod:`pipelines.stages.whatif_inputs`.

Reading and writing are :mod:`pipelines.catalog`'s job, MLflow :mod:`pipelines.tracking`'s, and the
wiring :mod:`pipelines.flows`' (one plan path: :func:`pipelines.flows.plan.plan_once`).
"""
