"""At most one re-plan per slot among workers sharing a runs folder (issue 32): the runs folder's slot claim.

Driven by events: the holder process says on a pipe when it holds the claim, and is killed with -9 while it does;
the test waits for its exit (``waitpid``), never for a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

from pipelines.io.run_folder import RunFolder, claim_slot

HOLDER = """
import sys
from pathlib import Path
from pipelines.io.run_folder import claim_slot
with claim_slot(Path(sys.argv[1]), sys.argv[2]) as skip:
    print("held" if skip is None else f"skip {skip}", flush=True)
    sys.stdin.read()  # hold until killed or told to go
"""


def test_a_second_claim_skips_while_held_and_after_kill_9_the_slot_is_free(tmp_path):
    slot = "20250316T1600Z"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), slot], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # the event: the other worker holds the slot
        with claim_slot(tmp_path, slot) as skip:
            assert skip == "running in another process"
        with claim_slot(tmp_path, "20250316T1630Z") as skip:
            assert skip is None  # the next slot is free meanwhile
        os.kill(holder.pid, signal.SIGKILL)  # the worker dies mid-replan
        assert holder.wait(timeout=60) == -signal.SIGKILL
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
    with claim_slot(tmp_path, slot) as skip:
        assert skip is None  # the kernel dropped the dead worker's lock


def test_a_slot_already_published_is_skipped(tmp_path):
    rf = RunFolder.begin(tmp_path, datetime(2025, 3, 16, 16, 0, tzinfo=UTC), run_id="a1", step_minutes=30)
    (rf.tmp_path / "plan.parquet").write_bytes(b"x")
    info, moved = rf.commit()
    assert moved
    with claim_slot(tmp_path, "20250316T1600Z") as skip:
        assert skip == f"already published as {info.path.name}"
    with claim_slot(tmp_path, "20250316T1630Z") as skip:
        assert skip is None


def _claim_day(barrier, marker: str, out) -> None:
    from datetime import date
    from pathlib import Path

    from pipelines.flows.schedules import claim_local_day

    barrier.wait(timeout=120)  # both workers' nightly runs start together
    out.put(claim_local_day(Path(marker), date(2025, 10, 26)))


def test_two_workers_nightly_runs_of_one_local_day_make_one_champion_decision(tmp_path):
    # the nightly flow retrains only when it claims its local day (pipelines.flows.retrain): of two workers started
    # at 02:00 together, exactly one claims it, so one gate runs and one champion decision is made
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    marker = str(tmp_path / "models" / "nightly_days.json")
    procs = [ctx.Process(target=_claim_day, args=(barrier, marker, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(out.get(timeout=5) for _ in procs) == [False, True]
    import json

    assert json.loads((tmp_path / "models" / "nightly_days.json").read_text()) == ["2025-10-26"]
