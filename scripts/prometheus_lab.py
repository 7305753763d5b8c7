"""Helpers of ``scripts/prometheus-lab.sh`` (issue 28); Python standard library only.

``openmetrics OUT END_UNIX``: the shipped ServeGen series (``data/fixtures/servegen/prometheus.json``: m-mid and
m-small, one sample per 600 s for 14 days, requests per second) shifted so that its last sample is at END_UNIX
(a multiple of 600), written as OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics`` — all but
the last hour (samples at or before END_UNIX - 3600). Metric ``servegen_request_rate{service=...}``, a gauge;
timestamps in seconds; the file ends with ``# EOF`` (OpenMetrics 1.0, which promtool requires).

``exporter PORT END_UNIX``: a live exporter on 127.0.0.1:PORT serving the last hour (the 6 samples after
END_UNIX - 3600) of the same shifted series, **with their timestamps**, one sample per series per scrape in time
order (the first scrape gets the oldest); once all are served it keeps serving the last one (an identical
duplicate, which Prometheus ignores). ``GET /served`` says how many were served (the test waits on it).

``shifted_body END_UNIX``: the shifted series as a query_range JSON body (what the file source reads).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERIES = Path(__file__).resolve().parent.parent / "data" / "fixtures" / "servegen" / "prometheus.json"
METRIC = "servegen_request_rate"
STEP_S = 600
LIVE_S = 3600


def shifted(end_unix: int) -> list[tuple[str, list[tuple[int, str]]]]:
    """``[(service, [(ts, value_text), ...]), ...]`` with each series' last sample at ``end_unix``."""
    doc = json.loads(SERIES.read_text())
    out = []
    for s in doc["data"]["result"]:
        values = s["values"]
        shift = end_unix - int(values[-1][0])
        out.append((s["metric"]["service"], [(int(t) + shift, v) for t, v in values]))
    return out


def openmetrics(out: Path, end_unix: int) -> int:
    """Write the backfill file (module docstring); the number of samples."""
    lines = [f"# HELP {METRIC} ServeGen requests per second (shipped fixture, shifted).", f"# TYPE {METRIC} gauge"]
    n = 0
    for service, values in shifted(end_unix):
        for t, v in values:
            if t <= end_unix - LIVE_S:
                lines.append(f'{METRIC}{{service="{service}"}} {v} {t}')
                n += 1
    lines.append("# EOF")
    out.write_text("\n".join(lines) + "\n")
    return n


def exporter(port: int, end_unix: int) -> None:
    """Serve the last hour one sample per scrape (module docstring) until killed."""
    live = [(svc, [(t, v) for t, v in vals if t > end_unix - LIVE_S]) for svc, vals in shifted(end_unix)]
    n_live = min(len(v) for _, v in live)
    state = {"next": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.startswith("/served"):
                body = json.dumps({"served": state["next"], "of": n_live}).encode()
                ctype = "application/json"
            else:
                with lock:
                    i = min(state["next"], n_live - 1)
                    state["next"] = min(state["next"] + 1, n_live)
                rows = [f"# TYPE {METRIC} gauge"]
                rows += [f'{METRIC}{{service="{svc}"}} {vals[i][1]} {vals[i][0] * 1000}' for svc, vals in live]
                body = ("\n".join(rows) + "\n").encode()
                ctype = "text/plain; version=0.0.4"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def shifted_body(end_unix: int) -> str:
    """The shifted series as a ``/api/v1/query_range`` body (``service`` label only)."""
    result = [{"metric": {"service": svc}, "values": [[t, v] for t, v in vals]} for svc, vals in shifted(end_unix)]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def main(argv: list[str]) -> int:
    """CLI (module docstring)."""
    if len(argv) == 3 and argv[0] == "openmetrics":
        print(openmetrics(Path(argv[1]), int(argv[2])))
        return 0
    if len(argv) == 3 and argv[0] == "exporter":
        exporter(int(argv[1]), int(argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "shifted_body":
        print(shifted_body(int(argv[1])))
        return 0
    print("usage: prometheus_lab.py openmetrics OUT END_UNIX | exporter PORT END_UNIX | shifted_body END_UNIX",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
