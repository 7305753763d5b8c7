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


# --- the demo's page on one screen (issue 27) --------------------------------------------------------------------

#: The demo's run folder inputs (``problem.json``, ``plan.json``, ``summary.json``, ``jobs.parquet``, ``demand.parquet``,
#: ``bands.parquet``, ``rt_status.json`` of ``gpuplan run`` on the shipped demo, 2026-12-02), re-rendered by the test.
DEMO_RUN = Path(__file__).parents[2] / "fixtures" / "demo-run"
#: Height (px) of the demo's ``risk_report.html`` before issue 27's layout (main 41e917a): ``gpuplan run`` on the demo,
#: the page opened in headless Chromium at 1400 × 900 (the Browser helper below), ``document.documentElement.scrollHeight``.
OLD_DEMO_HEIGHT_PX = 10721
VIEWPORT = (1400, 900)
#: In the page: every id of ``ids`` and every UTC time in the text must sit in a ``white-space: nowrap`` element drawn as
#: one box (``getClientRects().length == 1``); returns [checked, failures].
NOWRAP_JS = r"""((ids) => {
  const esc = s => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp('\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}(?::\\d{2})?Z|(?<![\\w-])(?:' +
                        ids.sort((a, b) => b.length - a.length).map(esc).join('|') + ')(?![\\w-])', 'g');
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let checked = 0; const bad = [];
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.parentElement || n.parentElement.offsetParent === null && n.parentElement.tagName !== 'BODY') continue;
    for (const m of n.textContent.matchAll(re)) {
      checked += 1;
      let el = n.parentElement;
      while (el && getComputedStyle(el).whiteSpace !== 'nowrap') el = el.parentElement;
      if (!el || el.getClientRects().length !== 1 || !el.textContent.includes(m[0])) bad.push(m[0]);
    }
  }
  return [checked, bad.slice(0, 10)];
})"""


def _demo_report(tmp_path: Path) -> tuple[dict[str, Path], Path, object]:
    """The demo run's report written again from its inputs (same code path as ``gpuplan run``)."""
    import json

    from pipelines.stages.outputs import report_inputs
    from pipelines.stages.whatif import load_base
    from pipelines.workspace.load import load_workspace

    base = load_base(DEMO_RUN)
    status = json.loads((DEMO_RUN / "rt_status.json").read_text())
    summary = json.loads((DEMO_RUN / "summary.json").read_text())
    selection = {s: {"rule": v.get("rule"), "candidates": {c: {"weight": w} for c, w in v.get("weights", {}).items()}}
                 for s, v in summary["headline"]["models"]["realtime"].items()}
    services = load_workspace(Path(__file__).parents[3] / "data" / "demo").services()
    # as the run wrote it: the demo's services, models and combination weights; written now (its inputs are old)
    inp = report_inputs(base.problem, base.plan, base.start, base.jobs, pd.read_parquet(DEMO_RUN / "demand.parquet"),
                        pd.read_parquet(DEMO_RUN / "bands.parquet"), status, services=services, rt_selection=selection,
                        models=summary["models"], node_names=base.nodes)
    folder = tmp_path / "run"
    folder.mkdir()
    for svc in status:  # the run's profile plots (written before the report; the page only links them)
        (folder / f"profile_{svc}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return write_risk_report(folder, inp, base.name, run_folder=folder), folder, inp


def _open(browser, page: Path) -> None:
    """Load ``page`` at 1400 × 900 and wait for its load event (every image decoded)."""
    import time

    browser.call("Emulation.setDeviceMetricsOverride", session=True, width=VIEWPORT[0], height=VIEWPORT[1],
                 deviceScaleFactor=1, mobile=False)
    browser.goto(page.as_uri())
    deadline = time.monotonic() + 120
    while not browser.js("document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"):
        assert time.monotonic() < deadline, "the page never finished loading"
        time.sleep(0.1)


@pytest.fixture()
def page_browser(tmp_path):
    """Headless Chromium over the DevTools pipe: the helper of ``tests/pipelines/flows/test_ui_browser.py``."""
    from tests.pipelines.flows.test_ui_browser import Browser, _chromium

    b = Browser(_chromium(), tmp_path / "chromium-profile")
    try:
        yield b
    finally:
        b.close()


def test_demo_page_reads_on_one_screen(tmp_path, page_browser):
    import json

    paths, folder, inp = _demo_report(tmp_path)
    _open(page_browser, paths["risk_report.html"])
    b = page_browser
    assert b.js("[window.innerWidth, window.innerHeight]") == list(VIEWPORT)
    height = b.js("document.documentElement.scrollHeight")
    assert height < OLD_DEMO_HEIGHT_PX / 3, height
    # the headline (its table) and what to do first (every action) inside the first 1400 x 900 screen
    boxes = b.js("""(() => {
      const h2 = Array.from(document.querySelectorAll('h2'));
      const at = t => h2.find(h => h.textContent === t);
      const next = (h, tag) => { let e = h.nextElementSibling; while (e && e.tagName !== tag) e = e.nextElementSibling; return e; };
      const r = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
      const head = at('Headline'), todo = at('What to do first');
      return {head: r(head), table: r(next(head, 'TABLE')), todo: r(todo), actions: r(next(todo, 'UL')),
              text: next(todo, 'UL').innerText};
    })()""")
    for key in ("head", "table", "todo", "actions"):
        left, top, right, bottom = boxes[key]
        assert 0 <= left and 0 <= top and right <= VIEWPORT[0] and bottom <= VIEWPORT[1], (key, boxes[key])
    # the demo's one job at risk and its options, as computed from the plan: real-time needs 13 of 64 GPUs at every
    # step, so at most 51 are free for the 64-GPU qtrn-00006; and the one aligned 64-GPU block (GPUs 0-63) holds
    # qtrn-00007 (planned from 16:00Z, 6.2 days) all horizon, so the GPUs to add are a new aligned block: 64 (with 16,
    # 80 - 13 = 67 would be enough GPUs but the what-if keeps qtrn-00007 and qtrn-00006 still waits: measured)
    text = boxes["text"]
    assert "qtrn-00006 (training, priority 2, 64 GPUs): never fits: needs 64 GPUs, at most 51 of 64" in text
    assert "Real-time minimum: 13 GPUs at every step, leaving at most 51 for batch work: this is what blocks it" in text
    assert ("In the way: the plan has batch work in every aligned 64-GPU block at every step; held for the whole "
            "horizon by qtrn-00007 (16 GPUs until 2025-03-22 20:30Z; long holder, 6.2 days).") in text
    assert f"gpuplan whatif {folder} --add-gpus 64" in text
    assert ("Smaller size: 16 GPUs fit the plan as it is from 2025-03-17 00:30Z (GPUs 32-47 on node-04..node-05 "
            "free of batch work and 16 GPUs idle for its 4 h, same GPU-hours (linear scaling))") in text
    resize = folder / "whatif-qtrn-00006-16gpus.json"
    assert f"gpuplan whatif {folder} --cancel qtrn-00006 --add-job {resize}" in text
    assert json.loads(resize.read_text()) == {"job_id": "qtrn-00006-16gpus", "kind": "training", "priority": 2.0,
                                              "release_step": 0, "gpus": 16, "duration_steps": 8}
    # the smaller size really fits the plan: GPUs 32-47 free of batch work and 16 GPUs idle over steps 17-24 ...
    from pipelines.report import usage

    batch, rt, grid = usage(inp.problem, inp.plan)
    idle = 64 - batch - rt
    assert all(grid[t][g] == "" for t in range(17, 25) for g in range(32, 48)) and idle[17:25].min() >= 16
    # ... and 32 GPUs (64 x 2 steps = 32 x 4 steps) fit at no step: an aligned free 32-block with 32 GPUs idle
    assert not any(idle[u:u + 4].min() >= 32 and all(grid[t][g] == "" for t in range(u, u + 4) for g in range(o, o + 32))
                   for u in range(45) for o in (0, 32))
    # no id or UTC time wrapped
    ids = [j.job_id for j in inp.problem.jobs] + [r.job_id for r in inp.problem.running]
    checked, bad = b.js(f"{NOWRAP_JS}({json.dumps(ids)})")
    assert bad == [] and checked > 100, (checked, bad)
    # waiting jobs grouped by reason: every waiting job in one group, each holder named once per group
    groups = b.js("""(() => {
      const h = Array.from(document.querySelectorAll('h2')).find(h => h.textContent === 'Waiting jobs by reason');
      const t = Array.from(document.querySelectorAll('table')).find(
        x => h.compareDocumentPosition(x) & Node.DOCUMENT_POSITION_FOLLOWING);
      return Array.from(t.querySelectorAll('tbody tr')).map(tr => Array.from(tr.cells).map(
        c => Array.from(c.querySelectorAll('.nw')).map(s => s.textContent).filter(x => !/Z$/.test(x))));
    })()""")
    waiting = [j.job_id for j in inp.problem.jobs
               if inp.plan.job(j.job_id).start_step is None or inp.plan.job(j.job_id).start_step > j.release_step]
    assert sorted(x for g in groups for x in g[1]) == sorted(waiting) and len(waiting) == 46
    for _, _, holders in groups:
        assert len(holders) == len(set(holders)), holders
    # the full tables are folded below: closed <details>, the estimated-start table inside one
    assert b.js("Array.from(document.querySelectorAll('details')).filter(d => !d.open).map("
                "d => d.querySelector('summary').textContent)") == [
        "Real-time coverage risk", "Jobs at risk", "Estimated start of every queued job", "Long holders",
        "Idle windows", "Queue outlook"]
