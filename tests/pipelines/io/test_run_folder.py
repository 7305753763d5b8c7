"""Run folders: atomic publish, UTC slot labels, `latest` never moved back, freshness (C25)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pipelines.io.errors import InputError
from pipelines.io.run_folder import (
    LATEST,
    LOCK_PREFIX,
    STALE_AFTER_S,
    RunFolder,
    StalePlanError,
    check_freshness,
    latest_run,
    list_runs,
)
from pipelines.io.slots import replan_slots, slot_label

LONDON = ZoneInfo("Europe/London")


def _publish(out, when, run_id, text="x"):
    rf = RunFolder.begin(out, when, run_id)
    (rf.tmp_path / "plan.txt").write_text(text)
    return rf.commit()


def test_slot_label_floors_to_utc_step_whatever_the_input_zone():
    # 02:44 BST = 01:44 UTC -> slot 01:30Z
    t = datetime(2025, 10, 25, 2, 44, tzinfo=LONDON)
    assert slot_label(t) == "20251025T0130Z"
    assert slot_label(datetime(2025, 10, 25, 1, 30, tzinfo=UTC)) == "20251025T0130Z"
    assert slot_label(datetime(2025, 10, 25, 1, 29, 59, tzinfo=UTC), 60) == "20251025T0100Z"
    with pytest.raises(InputError, match="no time zone"):
        slot_label(datetime(2025, 10, 25, 1, 0))


def test_london_autumn_day_has_25_hourly_utc_slots_none_twice():
    # C25 (b): the local day 2025-10-26 spans 2025-10-25T23:00Z .. 2025-10-27T00:00Z
    start = datetime(2025, 10, 26, 0, 0, tzinfo=LONDON)
    end = datetime(2025, 10, 27, 0, 0, tzinfo=LONDON)
    assert start.astimezone(UTC) == datetime(2025, 10, 25, 23, tzinfo=UTC)
    slots = replan_slots(start, end, 60)
    assert len(slots) == 25 and len(set(slots)) == 25
    assert slots[0] == "20251025T2300Z" and slots[-1] == "20251026T2300Z"
    assert len(replan_slots(start, end, 30)) == 50


def test_25_replans_over_the_autumn_day_publish_25_folders(tmp_path):
    start = datetime(2025, 10, 25, 23, tzinfo=UTC)
    for h in range(25):
        _publish(tmp_path, start + timedelta(hours=h), f"r{h}")
    runs = list_runs(tmp_path)
    assert len(runs) == 25 and len({r.slot for r in runs}) == 25
    assert latest_run(tmp_path).slot == "20251026T2300Z"


def test_older_catch_up_never_overwrites_newer(tmp_path):
    # C25 (a): backlog runs after a newer plan was published
    new, moved = _publish(tmp_path, datetime(2025, 9, 1, 3, tzinfo=UTC), "new")
    assert moved
    old, moved_old = _publish(tmp_path, datetime(2025, 9, 1, 1, tzinfo=UTC), "old")
    assert not moved_old
    assert old.path.is_dir()  # kept, labelled by its own slot
    assert latest_run(tmp_path).run_id == "new"
    # the same slot again (a re-run) does move latest
    _, moved_same = _publish(tmp_path, datetime(2025, 9, 1, 3, 10, tzinfo=UTC), "rerun")
    assert moved_same and latest_run(tmp_path).run_id == "rerun"


def test_freshness_check_fails_loudly_after_two_hours(tmp_path):
    with pytest.raises(StalePlanError, match="no plan"):
        check_freshness(tmp_path, datetime(2025, 9, 1, 3, tzinfo=UTC))
    _publish(tmp_path, datetime(2025, 9, 1, 0, tzinfo=UTC), "a")
    assert check_freshness(tmp_path, datetime(2025, 9, 1, 2, 0, tzinfo=UTC)).run_id == "a"
    with pytest.raises(StalePlanError, match=r"2\.5 h old, more than the 2 h limit"):
        check_freshness(tmp_path, datetime(2025, 9, 1, 2, 30, tzinfo=UTC))


def test_abort_and_dead_temp_folders_leave_previous_run(tmp_path):
    prev, _ = _publish(tmp_path, datetime(2025, 9, 1, 0, tzinfo=UTC), "prev", "old plan")
    rf = RunFolder.begin(tmp_path, datetime(2025, 9, 1, 1, tzinfo=UTC), "half")
    (rf.tmp_path / "plan.txt").write_text("half written")
    dead = rf.tmp_path
    writer_file = tmp_path / (LOCK_PREFIX + dead.name[len(".tmp-"):])
    assert writer_file.exists()
    # a live writer (its lock held) is never cleaned, however old its heartbeat
    old = time.time() - STALE_AFTER_S - 60
    for p in (dead, writer_file):
        os.utime(p, (old, old))
    RunFolder.begin(tmp_path, datetime(2025, 9, 1, 1, tzinfo=UTC), "other").abort()
    assert dead.is_dir()
    # simulate a killed process: its lock is dropped (the kernel does that), the files stay
    rf._writer._stop.set()
    rf._writer._thread.join()
    os.close(rf._writer.fd)
    assert (tmp_path / LATEST).resolve() == prev.path.resolve()
    assert [r.run_id for r in list_runs(tmp_path)] == ["prev"]
    RunFolder.begin(tmp_path, datetime(2025, 9, 1, 1, tzinfo=UTC), "next").abort()
    assert not dead.exists() and not writer_file.exists()  # no holder + old heartbeat: cleaned on the next begin
    assert {p.name for p in tmp_path.iterdir()} == {LATEST, ".latest.lock", prev.path.name}
    assert (prev.path / "plan.txt").read_text() == "old plan"


def test_freshness_command_exit_codes(tmp_path, capsys):
    from pipelines.io.run_folder import main

    assert main(["check", str(tmp_path)]) == 1
    assert "STALE: no plan" in capsys.readouterr().err
    _publish(tmp_path, datetime.now(UTC) - timedelta(hours=3), "old")
    assert main(["check", str(tmp_path)]) == 1
    assert "more than the 2 h limit" in capsys.readouterr().err
    _publish(tmp_path, datetime.now(UTC), "now")
    assert main(["check", str(tmp_path)]) == 0
    assert "fresh:" in capsys.readouterr().out
