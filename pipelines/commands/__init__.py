"""CLI sub-commands, one module each (see pipelines.cli)."""
