"""Aggregation over seeds, the paired comparison and issue 15's goals, on a hand-written bench.csv."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from pipelines.bench.aggregate import aggregate, goals, paired, read_rows, split_label
from pipelines.io.errors import InputError

ROOT = Path(__file__).resolve().parents[3]

HAND_CSV = """scenario,planner,utilization_pct,value,rt_sla_pct,exact_forecasts,bound_value,value_of_bound_pct
diurnal_peak@0,milp,90,110,100,1,120,95
diurnal_peak@0,fifo,70,100,100,1,120,83.33
diurnal_peak@0,priority,72,100,100,1,120,83.33
diurnal_peak@1,milp,80,90,99.8,1,101.12,89
diurnal_peak@1,fifo,70,100,100,1,101.12,98.89
diurnal_peak@1,priority,75,80,100,1,101.12,79.11
forecast_error@0,milp,60,50,100,0,59.52,84
forecast_error@0,fifo,50,40,100,0,39.6,101
forecast_error@0,priority,55,50,100,0,59.52,84
"""


@pytest.fixture()
def df(tmp_path):
    p = tmp_path / "bench.csv"
    p.write_text(HAND_CSV)
    return read_rows(p)


def test_mean_spread_and_worst_seed(df):
    a = {(r["scenario"], r["planner"]): r for r in aggregate(df)}
    m = a[("diurnal_peak", "milp")]
    assert m["n_seeds"] == 2
    assert (m["value_mean"], m["value_min"], m["value_max"], m["value_worst_seed"]) == (100.0, 90.0, 110.0, 1)
    assert m["value_std"] == pytest.approx(math.sqrt(200))  # sample std of 110, 90: sqrt((10² + 10²) / 1)
    assert (m["utilization_pct_mean"], m["utilization_pct_worst_seed"]) == (85.0, 1)
    assert (m["rt_sla_pct_mean"], m["rt_sla_pct_min"], m["rt_sla_pct_worst_seed"]) == (pytest.approx(99.9), 99.8, 1)
    assert m["value_of_bound_pct_mean"] == 92.0
    f = a[("forecast_error", "milp")]
    assert (f["n_seeds"], f["value_std"], f["value_worst_seed"]) == (1, None, 0)


def test_paired_per_seed(df):
    p = {(r["scenario"], r["baseline"]): r for r in paired(df)}
    assert ("diurnal_peak", "easy") not in p  # no easy rows: nothing to pair
    fifo = p[("diurnal_peak", "fifo")]
    assert [(s["seed"], s["ratio"], s["value_ge"], s["rt_ge"]) for s in fifo["seeds"]] == [
        (0, 1.1, True, True), (1, 0.9, False, False)]
    assert (fifo["n"], fifo["value_ge"], fifo["rt_ge"], fifo["ratio_min"], fifo["worst_seed"]) == (2, 1, 1, 0.9, 1)
    assert fifo["ratio_mean"] == pytest.approx(1.0)
    prio = p[("diurnal_peak", "priority")]
    assert (prio["value_ge"], prio["ratio_min"], prio["worst_seed"]) == (2, 1.1, 0)
    assert prio["ratio_mean"] == pytest.approx((1.1 + 1.125) / 2)
    assert p[("forecast_error", "fifo")]["ratio_mean"] == 1.25


def test_goals_with_measured_figures(df):
    g = {x["goal"]: x for x in goals(df, {"wall_s": 3000.0, "load_before": [1, 1, 1], "load_after": [2, 2, 2],
                                          "verified_plans": 10, "violations": 0}, quick_in_tests=True)}
    rt = g["MILP real-time served >= 99.9 % in every scenario and seed"]
    assert (rt["held"], rt["figure"]) == (False, "lowest 99.80 % (diurnal_peak@1); 1 of 3 scenario-seeds below")
    never = g["MILP real-time served never below any baseline's on the same seed"]
    # pairs: diurnal_peak 2 seeds x (fifo, priority) + forecast_error 1 seed x 2 = 6; seed 1's 99.8 % is below both
    assert (never["held"], never["figure"]) == (
        False, "2 of 6 (scenario, seed, baseline) pairs below: diurnal_peak@1 vs fifo, diurnal_peak@1 vs priority")
    mean = g["MILP value >= 1.05 x priority backfill on every scenario's mean"]
    assert (mean["held"], mean["figure"]) == (
        False, "1/2 scenarios; lowest 1.000x (forecast_error); below: forecast_error 1.000x")  # every failing one named
    seed = g["MILP value >= 1.0 x priority backfill on every seed"]
    assert (seed["held"], seed["figure"]) == (True, "3/3 scenario-seeds; lowest 1.000x (forecast_error@0)")
    util = g["utilisation gain over FIFO >= 15 points on diurnal_peak (mean over seeds)"]
    assert (util["held"], util["figure"]) == (True, "mean +15.0 points; worst seed 1: +10.0 (2 seeds)")
    exact = g["MILP value >= 90 % of the offline bound on every scenario with exact forecasts (mean over seeds)"]
    assert exact["held"] is True and exact["figure"].startswith("1/1 scenarios; lowest mean 92.0 % (diurnal_peak)")
    fe = g["MILP value >= 85 % of the offline bound under forecast_error (mean over seeds)"]
    assert (fe["held"], fe["figure"]) == (False, "mean 84.0 %; lowest seed 84.0 %")
    over = g["no planner above the offline bound"]
    assert (over["held"], over["figure"]) == (False, "forecast_error@0/fifo 101.00 %")
    run = g["full multi-seed benchmark under 60 minutes on the 2-core machine"]
    # 50 minutes, but 2 seeds, not 5: not a measurement of the goal (neither YES nor NO)
    assert (run["held"], run["figure"]) == (
        None, "not measured by this run (2 seed(s); it took 50.0 min): the goal is the full run of 5 seeds")
    quick = {x["goal"]: x for x in goals(df, {"wall_s": 30.0, "quick": True, "verified_plans": 10, "violations": 0},
                                        quick_in_tests=True)}
    assert quick["full multi-seed benchmark under 60 minutes on the 2-core machine"]["held"] is None
    # an 8-step --quick window grades none of the planner goals: the figure stays, the verdict is None
    q = quick["MILP value >= 1.05 x priority backfill on every scenario's mean"]
    assert (q["held"], q["figure"]) == (
        None, "--quick window, not graded: 1/2 scenarios; lowest 1.000x (forecast_error); below: forecast_error 1.000x")
    planner_goals = [x for x in quick.values() if x["goal"].startswith(("MILP", "utilisation", "no planner"))]
    assert len(planner_goals) == 8 and all(x["held"] is None for x in planner_goals)
    # what the quick run does measure keeps its verdict
    assert quick["every plan verified, 0 violations"]["held"] is True
    assert quick["bench --quick stays in the test suite"]["held"] is True


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert split_label("mixed@12") == ("mixed", 12) and split_label("mixed") == ("mixed", 0)
    with pytest.raises(InputError, match="NAME@SEED"):
        split_label("mixed@x")
    p = tmp_path / "bench.csv"
    p.write_text("scenario,planner,value\nmixed,milp,1\n")
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "scripts" / "bench_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([str(p)]) == 2
    assert capsys.readouterr().err.strip() == f"{p}: missing column 'utilization_pct' (written by gpuplan bench since issue 15)"
    p.write_text(HAND_CSV.replace("diurnal_peak@1,milp,80,90", "diurnal_peak@1,milp,80,ninety"))
    assert mod.main([str(p)]) == 2
    assert capsys.readouterr().err.strip() == f"{p}: row 5: value = 'ninety' is not a number"


def test_bench_tables_replaces_the_generated_block(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "scripts" / "bench_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "bench.csv").write_text(HAND_CSV)
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{mod.BEGIN}\nold\n{mod.END}\noutro\n")
    assert mod.main([str(tmp_path / "bench.csv"), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith(f"intro\n{mod.BEGIN}\n### Goals") and text.endswith(f"{mod.END}\noutro\n") and "old" not in text
    assert "| diurnal_peak | fifo | 1/2 | 1.000 | 0.900 (1) | 1/2 |" in text
    doc.write_text("no markers\n")
    assert mod.main([str(tmp_path / "bench.csv"), "--doc", str(doc)]) == 2


def test_bench_tables_issue30_block_from_csvs_of_two_shares(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "scripts" / "bench_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "bench.csv").write_text(HAND_CSV)
    pre = HAND_CSV.splitlines()
    pre = [pre[0] + ",preemptible_share,preempted_gpu_h,stops,stops_max_per_job"] + [r + ",0.3,1.5,1,1" for r in pre[1:]]
    (tmp_path / "b" / "bench.csv").write_text("\n".join(pre) + "\n")
    doc = tmp_path / "doc.md"
    doc.write_text(f"x\n{mod.BEGIN}\nkeep\n{mod.END}\n{mod.BEGIN30}\nold\n{mod.END30}\ny\n")
    csvs = [str(tmp_path / "a" / "bench.csv"), str(tmp_path / "b" / "bench.csv")]
    assert mod.main(["--issue30", *csvs, "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "keep" in text and "old" not in text and text.endswith(f"{mod.END30}\ny\n")
    assert "| forecast_error | 0.3 | 0 | 100.000 | 100.000 / – / 100.000 | 50.0 | 1.000 | 84.0 % | 1.5 (1, 1) | 1.5 / – / 1.5 |" in text
    assert "| forecast_error | 0 | 0 | 100.000 | 100.000 / – / 100.000 | 50.0 | 1.000 | 84.0 % | – | – |" in text
    # the issue-15 tables take one share
    assert mod.main(csvs) == 2
    assert "several preemptible shares" in capsys.readouterr().err
