"""Pulled sources without daemons (issue 28): query_range chunks, steps, retries against a stub server, config."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.load import load_workspace
from pipelines.workspace.sources import pull


def test_chunks_cover_every_point_once() -> None:
    # 0..6000 every 600 s = 11 points; at most 5 per chunk: 5 + 5 + 1
    assert pull.chunks(0, 6000, 600, 5) == [(0, 2400), (3000, 5400), (6000, 6000)]
    assert pull.chunks(0, 6000, 600, 11) == [(0, 6000)]
    assert pull.chunks(10, 0, 600) == []
    # two weeks + 1 h at 600 s = 2023 points: one chunk under Prometheus' 11,000 limit
    assert len(pull.chunks(0, 2022 * 600, 600)) == 1


@pytest.mark.parametrize(("step", "seconds"), [(600, 600), ("600", 600), ("600s", 600), ("10m", 600), ("1h", 3600)])
def test_steps(step: int | str, seconds: int) -> None:
    assert pull.parse_step_s(step) == seconds


@pytest.mark.parametrize("step", ["0", "1.5", "x", "-60"])
def test_bad_steps(step: str) -> None:
    with pytest.raises(ValueError, match="whole number of seconds"):
        pull.parse_step_s(step)


class _Stub:
    """A query_range stub: answers ``codes`` in turn (then 200), the matrix of the asked window, one series."""

    def __init__(self, codes: list[int], body_error: bool = False) -> None:
        self.codes, self.calls, self.body_error = list(codes), [], body_error
        stub = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                from urllib.parse import parse_qs, urlparse

                q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                stub.calls.append(q)
                code = stub.codes.pop(0) if stub.codes else 200
                if stub.body_error:
                    code, doc = 400, {"status": "error", "errorType": "bad_data", "error": "1:9: parse error"}
                elif code != 200:
                    doc = {"status": "error", "errorType": "unavailable", "error": "busy"}
                else:
                    a, b, st = int(q["start"]), int(q["end"]), int(q["step"])
                    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
                        {"metric": {"service": "s"}, "values": [[t, str(t // st)] for t in range(a, b + 1, st)]}]}}
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def stub() -> Iterator[type[_Stub]]:
    made: list[_Stub] = []

    def make(*args: object, **kw: object) -> _Stub:
        s = _Stub(*args, **kw)  # type: ignore[arg-type]
        made.append(s)
        return s

    yield make  # type: ignore[misc]
    for s in made:
        s.server.shutdown()


def test_chunks_joined_and_5xx_retried(stub) -> None:
    s = stub([503, 503])
    body = json.loads(pull.fetch_query_range(s.url, "q", 0, 6000, 600, max_points=5, backoff_s=0))
    values = body["data"]["result"][0]["values"]
    assert [v[0] for v in values] == list(range(0, 6001, 600))  # 11 samples, none twice
    assert len(s.calls) == 5  # 2 refused + 3 chunks
    assert [(c["start"], c["end"]) for c in s.calls[2:]] == [("0", "2400"), ("3000", "5400"), ("6000", "6000")]


def test_retries_are_bounded(stub) -> None:
    s = stub([503, 503, 503, 503])
    with pytest.raises(InputError, match=r"unavailable: busy \(after 3 attempts\)"):
        pull.fetch_query_range(s.url, "q", 0, 600, 600, backoff_s=0, where="sources.traffic")
    assert len(s.calls) == 3


def test_error_body_not_retried(stub) -> None:
    s = stub([], body_error=True)
    with pytest.raises(InputError, match=r"^sources.traffic: http://127.0.0.1:\d+: bad_data: 1:9: parse error$"):
        pull.fetch_query_range(s.url, "sum(", 0, 600, 600, backoff_s=0, where="sources.traffic")
    assert len(s.calls) == 1


BASE = """[cluster]
n_nodes = 2
gpus_per_node = 8

[sources.history]
format = "slurm-sacct"
{history}

[sources.queue]
format = "slurm-squeue-json"
command = "squeue --json"

[sources.traffic]
{traffic}
"""


@pytest.mark.parametrize(("history", "traffic", "message"), [
    ('path = "a.txt"\ncommand = "sacct"', 'format = "csv"\npath = "t.csv"', "either path or command"),
    ('command = "sacct"', 'format = "prometheus-http"\nurl = "http://p:9090"', "needs url and query"),
    ('command = "sacct"', 'format = "prometheus-http"\nurl = "p:9090"\nquery = "up"', "expected http://HOST:PORT"),
    ('command = "sacct"', 'format = "prometheus-http"\nurl = "http://p"\nquery = "up"\nstep = "5x"', "step '5x'"),
])
def test_config_errors_one_line(tmp_path: Path, history: str, traffic: str, message: str) -> None:
    (tmp_path / "gpuplan.toml").write_text(BASE.format(history=history, traffic=traffic))
    with pytest.raises(InputError, match=message) as err:
        load_workspace(tmp_path)
    assert "\n" not in str(err.value)


def test_pulled_source_config(tmp_path: Path) -> None:
    traffic = 'format = "prometheus-http"\nurl = "http://p:9090"\nquery = "up"\nstep = "10m"'
    (tmp_path / "gpuplan.toml").write_text(BASE.format(history='command = "sacct -P"', traffic=traffic))
    ws = load_workspace(tmp_path)
    assert ws.source("history").pulled and ws.source("traffic").pulled
    assert ws.source("traffic").units == "rate_per_s"
    assert ws.source("traffic").lookback_h == 360
