"""The CLI entry point: help is fast to import and lists every command of DESIGN §7.1."""

from typer.testing import CliRunner

from pipelines.cli import app


def test_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in ("run", "train", "predict", "profile", "plan", "bench", "serve"):
        assert f" {cmd} " in result.output
