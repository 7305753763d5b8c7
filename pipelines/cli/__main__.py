"""``python -m pipelines.cli``: the ``gpuplan`` command line."""

from pipelines.cli.app import app

app()
