"""The ``gpuplan`` command line: the typer app and one module per command (parse options, call a flow or stage, print)."""
