"""The CLI entry point: help is fast to import and lists every command of DESIGN §7.1."""

from typer.testing import CliRunner

from pipelines.cli.app import app


def test_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in ("run", "train", "predict", "profile", "plan", "bench", "serve"):
        assert f" {cmd} " in result.output


def _cli_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    env["PYTHONPATH"] = str(ROOT)
    return env


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_every_command_turns_telemetry_off_without_the_callers_environment():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import os, pipelines.cli.app; "
                          "print(os.environ['MLFLOW_DISABLE_TELEMETRY'], os.environ['DO_NOT_TRACK'])"],
                         capture_output=True, text=True, env=_cli_env(), check=True)
    assert out.stdout.split() == ["true", "1"]


def test_closed_stdout_stops_quietly_with_sigpipe_code():
    # `gpuplan plan ... | head -1`: the reader leaves; no "internal error" line, exit 141
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "pipelines.cli.app", "plan", "--problem",
                          str(ROOT / "data" / "examples" / "valley.json"), "--planner", "fifo"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_cli_env(), cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # closed before the command writes its first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141
    assert "internal error" not in err and "Traceback" not in err
