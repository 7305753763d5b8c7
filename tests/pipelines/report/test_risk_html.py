"""``risk_report.html``: self-contained, the same content as ``risk_report.md``, and it renders in headless Chromium.

The Chromium test skips only when no Chromium binary exists and ``$CI`` is unset; ``.ci/run`` installs
Chromium from apt when missing and sets ``CI``, so CI always runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from optimizer.plan import JobAssignment, Plan
from optimizer.problem import Problem
from pipelines.report import ReportInputs, write_risk_report

T0 = datetime(2025, 3, 16, 16, tzinfo=UTC)
#: Chromium binaries looked for on PATH, in order (``$CHROMIUM`` first when set).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    names = ([os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else []) + list(CHROMIUM_NAMES)
    return next((p for p in (shutil.which(n) for n in names) if p), None)


def _report(tmp_path: Path) -> dict[str, Path]:
    """A small plan with two services and a measured day: every plot of the page is drawn."""
    H = 8
    problem = Problem.from_dict({
        "cluster": {"n_gpus": 16, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": H},
        "settings": {"time_limit_s": 5},
        "services": [{"service": s, "demand_gpus": [3] * H, "min_gpus": 1, "max_gpus": 8, "swap_cap_gpus": 2,
                      "current_gpus": 3} for s in ("chat", "code")],
        "jobs": [{"job_id": "A", "kind": "training", "priority": 2, "release_step": 0, "gpus": 8, "duration_steps": 4,
                  "deadline_step": 4},
                 {"job_id": "B", "kind": "batch_inference", "priority": 1, "release_step": 0, "gpus": 4,
                  "duration_steps": 2}]})
    plan = Plan(planner="milp", status="optimal", assignments=(JobAssignment("A", 0, 4, 0, 8),
                                                                JobAssignment("B", 0, 2, 8, 4)),
                service_gpus={"chat": (3,) * H, "code": (3,) * H}, objective=1.0, bound=1.0, gap=0.0, solve_s=0.1,
                model=None, n_gpus=16, horizon_steps=H)
    demand = pd.DataFrame([{"service": s, "step": t, "demand_gpus_p50": 2, "demand_gpus_p90": 3}
                           for s in ("chat", "code") for t in range(H)])
    jobs = pd.DataFrame({"job_id": ["A", "B"], "kind": ["training", "batch_inference"], "priority": [2.0, 1.0],
                         "state": "queued", "duration_p10_h": [1.5, 0.8], "duration_p50_h": [2.0, 1.0],
                         "duration_p90_h": [2.5, 1.2],
                         "deadline_at": [pd.Timestamp("2025-03-16 18:10:05", tz="UTC"), pd.NaT]})
    ts = pd.date_range("2025-03-15 16:00", periods=24, freq="h", tz="UTC")
    bands = pd.concat([pd.DataFrame({"service": s, "ts": ts, "actual": 2.0e6 + 1e5 * np.sin(np.arange(24) + k),
                                     "p50": 2.0e6, "p90": 2.3e6}) for k, s in enumerate(("chat", "code"))])
    inp = ReportInputs(problem=problem, plan=plan, start_ts=T0, jobs=jobs, demand=demand, bands=bands,
                       rt_status={"chat": ("ok", ""), "code": ("ok", "")}, written_at=T0)
    return write_risk_report(tmp_path, inp, "run-h")


def test_html_is_self_contained_with_the_pages_content(tmp_path):
    paths = _report(tmp_path)
    html = paths["risk_report.html"].read_text()
    md = paths["risk_report.md"].read_text()
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) == 4 and all(src.startswith("data:image/png;base64,") for src in imgs)
    # nothing loaded from outside: no scripts, stylesheets, fonts, frames or remote URLs
    assert not re.search(r"<script|<link|<iframe|@import|url\(|src=\"http|href=\"http", html)
    # the plot links of the headline point at the embedded images
    assert 'href="#plot-gantt"' in html and 'id="plot-gantt"' in html and 'href="gantt.png"' not in html
    # same content: every heading and every table row's first cell of the Markdown is in the HTML
    for head in re.findall(r"^#+ (.+)$", md, flags=re.M):
        assert f">{head}</h" in html
    assert "<td>Planned utilisation</td>" in html and "2025-03-16 18:10:05Z" in html
    assert md.count("\n| ") - md.count("\n|---") <= html.count("<tr>")


def test_html_renders_in_headless_chromium(tmp_path):
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium binary in CI (.ci/run installs it from apt): " + ", ".join(CHROMIUM_NAMES))
        pytest.skip("no Chromium binary (chromium, chromium-browser, google-chrome); CI installs it")
    paths = _report(tmp_path)
    # a probe copy records, once the page has loaded, each image's natural size in the DOM
    probe = tmp_path / "probe.html"
    script = ("<script>window.addEventListener('load',()=>{document.body.setAttribute('data-imgs',"
              "Array.from(document.images).map(i=>i.complete+':'+i.naturalWidth+'x'+i.naturalHeight).join(','));"
              "});</script>")
    probe.write_text(paths["risk_report.html"].read_text().replace("</body>", script + "</body>"))
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000"]
    dom = subprocess.run([*base, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180,
                         check=True).stdout
    assert "<h2>Headline</h2>" in dom and "Planned utilisation" in dom
    sizes = re.search(r'data-imgs="([^"]*)"', dom)
    assert sizes is not None, dom[-2000:]
    loaded = sizes.group(1).split(",")
    assert len(loaded) == 4
    for item in loaded:
        complete, wh = item.split(":")
        w, h = (int(x) for x in wh.split("x"))
        assert complete == "true" and w > 300 and h > 200, loaded
    # and the page itself (no probe) paints: a screenshot that is not blank
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1200,1600", paths["risk_report.html"].as_uri()],
                   capture_output=True, timeout=180, check=True)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[0] == 1600 and pixels.shape[1] == 1200 and float(pixels[..., :3].std()) > 0.05
