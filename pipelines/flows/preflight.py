"""What ``gpuplan run`` checks before Prefect starts, so bad input is one line: ingest and the store's traffic and age.

Imports no Prefect (the CLI calls it before the flow's ~2.5 s of imports).
"""

from __future__ import annotations

from pipelines.config.settings import job_side
from pipelines.workspace.load import Workspace


def ingest_and_check(ws: Workspace) -> list[str]:
    """The store side (:func:`pipelines.config.settings.job_side`): ingest the exports and check the store.

    Returns the lines to print on standard error (``warning:`` an unreadable export, ``note:`` an old
    queue export); nothing for the shipped side. The flow is then run with ``ingested=True`` (once per run).

    Raises:
        pipelines.io.errors.InputError: a configured service without traffic samples, or a bad export.
    """
    if job_side(ws) == "shipped":
        return []
    import pandas as pd

    from pipelines.stages.traffic import check_services_have_traffic
    from pipelines.workspace.ingest import ingest, workspace_data

    lines = []
    report = ingest(ws)
    for role, r in report["sources"].items():
        for name in r.get("unreadable_files", []):
            lines.append(f"warning: {role} export {name} could not be read; planning from the store "
                         f"('gpuplan ingest --workspace {ws.root}' shows why)")
    data = workspace_data(ws)
    check_services_have_traffic(data.traffic, ws.services(), ws.source("traffic").service_label)
    if data.snapshot_at is not None:
        age_h = (pd.Timestamp.now(tz="UTC") - pd.Timestamp(data.snapshot_at)).total_seconds() / 3600
        if age_h * 60 > ws.config.replan.max_input_age_min:
            lines.append(f"note: the newest queue export ({data.snapshot_file}) was taken "
                         f"{pd.Timestamp(data.snapshot_at):%Y-%m-%dT%H:%MZ}, {age_h:,.1f} h ago: this run "
                         f"plans as of then (a replan would refuse it)")
    return lines
