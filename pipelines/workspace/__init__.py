"""An operator's workspace: its ``gpuplan.toml``, its record store, ingesting its exports, and the parsers.

- :mod:`pipelines.workspace.config`: the ``gpuplan.toml`` model (cluster, services, sources, store, ...),
  the one service type :class:`~pipelines.workspace.config.ServiceSettings` and ``services.json``;
- :mod:`pipelines.workspace.load`: the folder, parsing its config once into a
  :class:`~pipelines.workspace.load.Workspace`, the text ``gpuplan init`` writes;
- :mod:`pipelines.workspace.store`: the growing record store (parquet, upserts);
- :mod:`pipelines.workspace.ingest`: the workspace's exports into its store (idempotent);
- :mod:`pipelines.workspace.sources`: pure parsers of Slurm, Kueue, Prometheus and tabular exports.
"""
