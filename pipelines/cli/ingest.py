"""Read the workspace's scheduler and metrics exports into its store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipelines.cli.support import WORKSPACE_HELP, emit_json, run_guarded, use_workspace


def not_added_lines(r: dict) -> list[str]:
    """The line under a source's counts naming what happened to the records neither added, updated nor rejected.

    ``r``: one source of :func:`pipelines.workspace.ingest.ingest`'s report. Its ``unchanged``, ``older`` and
    ``superseded`` counts, only those above zero, then any remainder of ``read`` left unexplained (none when
    the counts add up); no line when every record read was added, updated or rejected.
    """
    unit = r.get("unit", "records")
    rest = r["read"] - r["added"] - r["updated"] - r["rejected"]
    if rest <= 0:
        return []
    parts = [(r.get("unchanged", 0), "already stored, unchanged"),
             (r.get("older", 0), "older than the stored record (the stored one is kept)"),
             (r.get("superseded", 0), "also read from another export or source in this ingest (one record per job "
                                      "is kept, the one furthest along its life, and counted there)" if unit == "jobs"
                                      else "also read from another export in this ingest (the later is kept)")]
    said = [f"{n} {what}" for n, what in parts if n]
    left = rest - sum(n for n, _ in parts)
    if left > 0:
        said.append(f"{left} not accounted for")
    return [f"         the other {rest} {unit}: " + "; ".join(said)]


def ingest(
    workspace: Annotated[Path | None, typer.Option("--workspace", help=WORKSPACE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON document.")] = False,
) -> None:
    """Append new records of every source to the store; update changed ones; report per source (nodes: per GPU type)."""

    def body() -> int:
        ws = use_workspace(workspace)
        from pipelines.io.errors import InputError
        from pipelines.workspace.ingest import ingest as run_ingest

        report = run_ingest(ws)
        bad = [f"{role}: {name}" for role, r in report["sources"].items() for name in r.get("unreadable_files", [])]
        if as_json:
            emit_json(report)
            if bad:
                raise InputError(f"{len(bad)} export(s) could not be read (their records are not in the store; "
                                 f"see errors): {', '.join(bad)}")
            return 0
        lines = [f"workspace: {report['workspace']}", f"store:     {report['store']}"]
        for role, r in report["sources"].items():
            if r.get("demo"):
                lines.append(f"{role:8s} demo source (read at plan time from the shipped files)")
                continue
            if role == "nodes":  # the inventory: nodes per matched type, what changed since the last export
                lines.append(f"nodes    {r['file']}: read {r['read']} nodes, {r['gpu_nodes']} with GPUs, rejected "
                             f"{r['rejected']}")
                lines.extend(f"         {t:12s} {v['nodes']:>5} nodes {v['gpus']:>6} GPUs"
                             + (f"  ({v['down_nodes']} nodes / {v['down_gpus']} GPUs down)" if v["down_nodes"] else "")
                             for t, v in r["by_type"].items())
                changed = {k: v for k, v in r.get("changed", {}).items() if v}
                if changed:
                    lines.append("         changed: " + "; ".join(f"{k} {', '.join(v[:5])}"
                                                                 + (f" (+{len(v) - 5})" if len(v) > 5 else "")
                                                                 for k, v in changed.items()))
                lines.extend(f"         {e}" for e in r["errors"][:10])
                continue
            lines.append(f"{role:8s} {r.get('unit', 'records')}: read {r['read']:>7}  added {r['added']:>7}  "
                         f"updated {r['updated']:>6}  rejected {r['rejected']:>5}"
                         + (f"  ({r['array_tasks']} array tasks from {r['array_records_expanded']} array records)"
                            if r.get("array_records_expanded") else ""))
            lines.extend(not_added_lines(r))
            if r.get("clock_note"):
                lines.append(f"         note: {r['clock_note']}")
            lines.extend(f"         {e}" for e in r["errors"][:10])
            if len(r["errors"]) > 10 or r.get("error_lines", 0) > 10:
                lines.append(f"         ... {r.get('error_lines', len(r['errors'])) - 10} more lines "
                             f"(--json lists up to 50)")
        typer.echo("\n".join(lines))
        if bad:
            raise InputError(f"{len(bad)} export(s) could not be read (their records are not in the store; "
                             f"see above): {', '.join(bad)}")
        return 0

    run_guarded(body)
