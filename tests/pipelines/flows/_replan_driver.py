"""Subprocess driver for the C26 test: run one ``plan`` flow (replan) on a problem file.

Usage: python _replan_driver.py PROBLEM OUT_DIR SLOT_ISO [--hang]

``--hang`` patches the planner to sleep forever (the solve task's ``timeout_seconds`` must stop
it). Prints one JSON line ``{"ok": bool, "error": str|None, "result": {...}|None}``; exit 0 on
success, 3 on failure.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime


def main() -> int:
    problem, out_dir, slot = sys.argv[1], sys.argv[2], sys.argv[3]
    if "--hang" in sys.argv[4:]:
        import optimizer.planners

        def sleep_forever(*args, **kwargs):
            while True:
                time.sleep(3600)

        optimizer.planners.plan = sleep_forever
    from pipelines.flows.plan import plan_flow

    try:
        res = plan_flow(problem_path=problem, out_dir=out_dir, scheduled_at=datetime.fromisoformat(slot))
    except BaseException as exc:  # noqa: BLE001 - report any failure to the test
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}", "result": None}))
        return 3
    print(json.dumps({"ok": True, "error": None, "result": res}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
