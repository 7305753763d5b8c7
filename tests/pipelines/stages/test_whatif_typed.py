"""``gpuplan whatif`` on a typed run (issue 26): ``--add-gpus TYPE:N``, ``--drain-node`` on a typed node, bad TYPE:N.

The hand problem of tests/optimizer/test_whatif_typed.py: node ``v0`` (4 x V100M32, running R for 3 more steps)
and ``t0`` (4 x T4); V (V100M32 only) waits for R until step 3, T (T4 only) starts at 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli.app import app
from tests.optimizer.test_whatif_typed import _problem
from tests.pipelines.stages.test_whatif import run_folder


@pytest.fixture()
def typed(tmp_path):
    return run_folder(tmp_path, _problem().to_dict(), ["v0", "t0"])


def _json(*args) -> dict:
    res = CliRunner().invoke(app, ["whatif", *map(str, args), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_add_v100_gpus_starts_the_v100_job_earlier_and_leaves_the_t4_job(typed):
    doc = _json(typed, "--add-gpus", "V100M32:8")
    assert doc["changes"] == ["+8 V100M32 GPUs"]
    jobs = {j["job_id"]: j for j in doc["jobs"]}
    v = jobs["V"]
    assert (v["start_ts_base"], v["start_ts_whatif"], v["delta_h"]) == ("2025-03-16T17:30:00Z",
                                                                        "2025-03-16T16:00:00Z", -1.5)
    assert v["nodes_base"] == "v0" and v["nodes_whatif"] in ("added-00", "added-01")
    assert "T" not in jobs or jobs["T"]["start_ts_base"] == jobs["T"]["start_ts_whatif"]  # T4-only: same start
    assert doc["whatif"]["verified"] is True and (doc["base"]["gpus_up"], doc["whatif"]["gpus_up"]) == (8, 16)


def test_drain_a_typed_node(typed):
    doc = _json(typed, "--drain-node", "t0")
    assert doc["changes"] == ["t0 drained"]
    t = next(j for j in doc["jobs"] if j["job_id"] == "T")
    assert t["start_ts_base"] == "2025-03-16T16:00:00Z" and t["start_ts_whatif"] is None  # no other T4 node


@pytest.mark.parametrize(("value", "line"), [
    ("V100M32:x", "error: --add-gpus 'V100M32:x': expected N (whole GPUs) or TYPE:N (N GPUs of a GPU type of the "
                  "run's cluster, e.g. V100M32:8)"),
    ("H100:8", "error: --add-gpus H100:8: no node of type 'H100' in the run (types: V100M32, T4)"),
    ("V100M32:6", "error: --add-gpus V100M32:6: V100M32 nodes have 4 GPUs; give a multiple of 4 or a power of two "
                  "(one node of that many GPUs)"),
    ("8", "error: --add-gpus 8: the run's cluster has GPU types (V100M32, T4); give --add-gpus TYPE:N"),
])
def test_bad_add_gpus_is_one_line_exit_2(typed, value, line):
    res = CliRunner().invoke(app, ["whatif", str(typed), "--add-gpus", value])
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and res.stderr.splitlines() == [line]


def test_malformed_type_count_fails_before_the_run_folder_is_read(tmp_path: Path):
    res = CliRunner().invoke(app, ["whatif", str(tmp_path / "nowhere"), "--add-gpus", ":8"])
    assert res.exit_code == 2 and res.stderr.splitlines()[0].startswith("error: --add-gpus ':8': expected N")
