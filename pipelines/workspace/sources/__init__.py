"""Source adapters: pure parsers from a cluster's scheduler and metrics exports to canonical records.

:mod:`pipelines.workspace.sources.records` holds the record columns and the helpers every adapter shares.
"""
