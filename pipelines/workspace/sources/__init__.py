"""Source adapters: pure parsers from a cluster's scheduler and metrics exports to canonical records.

:mod:`pipelines.workspace.sources.records` holds the record columns and the helpers every adapter shares;
:mod:`~pipelines.workspace.sources.slurm` (sacct) and :mod:`~pipelines.workspace.sources.slurm_squeue`,
:mod:`~pipelines.workspace.sources.kueue` (with :mod:`~pipelines.workspace.sources.kueue_gpus`),
:mod:`~pipelines.workspace.sources.prometheus`, :mod:`~pipelines.workspace.sources.tabular`. The writers
(their inverse) are in :mod:`pipelines.replay`.
"""
