"""The ``gpuplan`` command line (DESIGN §7.1).

One entry point; each sub-command lives in its own module under :mod:`pipelines.cli`,
which imports heavy libraries (pandas, lightgbm, highspy, prefect, mlflow) only inside the
command body so that ``gpuplan --help`` stays fast.

Exit codes: 0 success, 1 internal failure, 2 bad input (one line on standard error), including
usage errors such as a missing or unknown option (:class:`pipelines.cli.support.OneLineErrorGroup`).
With ``--json`` a command prints exactly one JSON document on standard output; progress
and logs go to standard error.

Help is click's plain format (``rich_markup_mode=None``): typer 0.29's rich panel prints a type
column for every option, flags included (``--json <bool>``), while the plain format writes a flag
as a flag (``--json``) and an option with its value name (``--scenario NAME``).
"""

from __future__ import annotations

import typer

from pipelines.cli import bench, forecast, ingest, init, plan, predict, profile, replay, run, serve, train, whatif
from pipelines.cli.support import OneLineErrorGroup
from pipelines.config.settings import apply_env_defaults

# every command, not only run/serve: telemetry off and Prefect's home inside the project, so no
# command (e.g. predict training a model and logging it to MLflow) writes outside the clone
apply_env_defaults()

app = typer.Typer(
    name="gpuplan",
    help="Forecasting-centric GPU allocator: forecast each workload kind, plan 24 h with a MILP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: flags render as flags (module docstring)
    cls=OneLineErrorGroup,  # usage errors: one line on stderr, exit 2
)

app.command("init", help=init.__doc__)(init.init)
app.command("ingest", help=ingest.__doc__)(ingest.ingest)
app.command("run", help=run.__doc__)(run.run)
app.command("train", help=train.__doc__)(train.train)
app.command("predict", help=predict.__doc__)(predict.predict)
app.command("profile", help=profile.__doc__)(profile.profile)
app.command("forecast", help=forecast.__doc__)(forecast.forecast)
app.command("plan", help=plan.__doc__)(plan.plan)
app.command("bench", help=bench.__doc__)(bench.bench)
app.command("serve", help=serve.__doc__)(serve.serve)
app.command("replay", help=replay.__doc__)(replay.replay)
app.command("whatif", help=whatif.__doc__)(whatif.whatif)


if __name__ == "__main__":  # pragma: no cover
    app()
