"""Test helper: one run-folder writer in its own process.

``python _run_folder_writer.py OUT SLOT_ISO RUN_ID READY GO``: ``RunFolder.begin`` (which cleans
stale temporary folders first), write ``plan.txt``, create the file READY, wait until the file
GO exists (at most 120 s), then commit. Prints one JSON line ``{"ok", "run_dir" | "error"}``.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

from pipelines.io.run_folder import RunFolder


def main() -> int:
    out, when, run_id, ready, go = sys.argv[1:6]
    try:
        rf = RunFolder.begin(Path(out), datetime.fromisoformat(when), run_id)
        (rf.tmp_path / "plan.txt").write_text(run_id)
        Path(ready).write_text(rf.tmp_path.name)
        deadline = time.monotonic() + 120
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise TimeoutError("GO never came")
            time.sleep(0.05)
        info, _ = rf.commit()
    except Exception as exc:  # report, do not hide: the test asserts ok
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps({"ok": True, "run_dir": str(info.path)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
