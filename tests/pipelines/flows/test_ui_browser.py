"""What an operator sees in the Prefect and MLflow web UIs, read in a real headless Chromium (issue 33).

- Prefect: a served demo workspace; the test opens the ``replan`` deployment's page, clicks **Run** →
  **Quick run**, waits for the run through Prefect's REST API, then reads on the run's page its state and
  the WARNING about stale inputs (the demo's shipped 2025 data), and on the artifact's page its first line.
- MLflow: the run of a job forecaster, opened in the model-training view; its description gives the MAE
  ratio to the analytic baseline and says the history is generated.

Chromium is driven over its DevTools protocol on a pipe (``--remote-debugging-pipe``: no extra
dependency, no port). Waits are on events: a server's health endpoint, a run's final state through the
REST API, the page's text containing what it must show (bounded by a deadline), never a fixed sleep.
Without Chromium the tests skip, except under ``$CI`` (as ``tests/pipelines/report/test_risk_html.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

VENV_BIN = Path(sys.executable).parent
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _chromium() -> str:
    names = ([os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else []) + list(CHROMIUM_NAMES)
    exe = next((p for p in (shutil.which(n) for n in names) if p), None)
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium binary in CI (.ci/run installs it from apt)")
        pytest.skip("no Chromium binary; CI installs it")
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read() or b"null")


def _post(url: str, body: dict) -> Any:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{url} not healthy after {timeout_s} s"
        time.sleep(0.5)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process group we started, by its PID."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class Browser:
    """Headless Chromium over the DevTools protocol on a pipe (fds 3/4 of the browser): one page."""

    def __init__(self, exe: str, profile: Path):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        hi_r, hi_w = os.dup(to_chrome_r) + 100, os.dup(from_chrome_w) + 100
        os.dup2(to_chrome_r, hi_r)
        os.dup2(from_chrome_w, hi_w)

        def fds() -> None:  # in the child: the protocol's fds 3 (commands in) and 4 (answers out)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        for fd in (to_chrome_r, from_chrome_w, hi_r, hi_w):
            os.close(fd)
        self._id, self._buf = 0, b""
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def call(self, method: str, session: bool = False, **params: Any) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._r, 1 << 16)
                assert chunk, "Chromium closed its DevTools pipe"
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._id:
                assert "error" not in answer, answer
                return answer.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def js(self, expr: str) -> Any:
        res = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True, awaitPromise=True)
        return res.get("result", {}).get("value")

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def wait_text(self, *needles: str, timeout_s: float = 120) -> str:
        """The page's text once it contains every needle (the page's own rendering is the event waited for)."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            if all(n in text for n in needles):
                return text
            assert time.monotonic() < deadline, f"page never showed {needles}; it shows: {text[-2000:]}"
            time.sleep(0.25)

    def click_text(self, tag: str, label: str, timeout_s: float = 60) -> None:
        """Click the first visible ``tag`` element whose text is ``label`` (waits until there is one)."""
        expr = (f"(() => {{ const el = Array.from(document.querySelectorAll({json.dumps(tag)}))"
                f".find(e => e.innerText && e.innerText.trim() === {json.dumps(label)} && e.offsetParent !== null);"
                " if (!el) return false; el.click(); return true; })()")
        deadline = time.monotonic() + timeout_s
        while not self.js(expr):
            assert time.monotonic() < deadline, f"no {tag} '{label}' on the page: {self.text()[-1500:]}"
            time.sleep(0.25)

    def screenshot(self, path: Path) -> None:
        import base64

        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True)["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            _stop(self.proc)
        for fd in (self._r, self._w):
            os.close(fd)


@pytest.fixture()
def browser(tmp_path):
    b = Browser(_chromium(), tmp_path / "chromium-profile")
    try:
        yield b
    finally:
        b.close()


def _iso(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "GPUPLAN_", "MLFLOW_"))}
    return {**env, "GPUPLAN_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}",
            "GPUPLAN_ARTIFACT_ROOT": str(tmp_path / "mlruns" / "artifacts"),
            "GPUPLAN_RUNS_DIR": str(tmp_path / "runs"), "GPUPLAN_MODELS_DIR": str(tmp_path / "models"),
            "DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "TMPDIR": str(tmp_path)}


@pytest.mark.heavy
def test_prefect_ui_quick_run_of_the_replan_shows_state_stale_warning_and_artifact(tmp_path, browser):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**_iso(tmp_path), "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_UI_API_URL": api}
    (tmp_path / "prefect").mkdir()
    server_log = tmp_path / "server.log"
    server = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=env, stdout=open(server_log, "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    serve = None
    try:
        _wait_healthy(f"{api}/health", server, server_log)
        serve_env = {**env, "PREFECT_API_URL": api, "GPUPLAN_SERVE_SCHEDULES": "0"}
        serve = subprocess.Popen([str(VENV_BIN / "gpuplan"), "serve"], env=serve_env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
        from pipelines.flows.deployments import READY_LINE

        assert serve.stderr is not None
        seen = []
        for line in serve.stderr:  # the ready line is the event
            seen.append(line)
            if line.strip() == READY_LINE:
                break
        assert seen and seen[-1].strip() == READY_LINE, "".join(seen)[-3000:]
        # serve's (and its flow runs') further output is read on, so a full pipe never blocks them
        threading.Thread(target=lambda: seen.extend(serve.stderr), daemon=True).start()
        dep = _get(f"{api}/deployments/name/plan/replan")
        assert "tz:UTC" in dep["tags"]
        # the operator's two clicks: the deployment's page, Run -> Quick run
        def quick_run() -> float:
            browser.goto(f"http://127.0.0.1:{port}/deployments/deployment/{dep['id']}")
            browser.wait_text("replan")
            browser.click_text("button", "Run")
            browser.click_text("*", "Quick run")
            return time.monotonic()

        clicked_at, clicks = quick_run(), 1
        # wait through the REST API for the run the click created, until it is final; a click the page did not
        # take (seen once in a fresh-clone CI: no run after 9 min) is made again, as an operator would, at most twice
        deadline, run = time.monotonic() + 900, None
        while time.monotonic() < deadline:
            runs = _post(f"{api}/flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [dep["id"]]}}})
            run = runs[0] if runs else None
            if run is None and clicks < 3 and time.monotonic() - clicked_at > 45:
                clicked_at, clicks = quick_run(), clicks + 1
            if run and run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            assert serve.poll() is None, "gpuplan serve exited"
            time.sleep(2)
        if run is not None and run["state_type"] != "COMPLETED":  # say why: the state's message and the run's logs
            logs = _post(f"{api}/logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}}, "limit": 50})
            raise AssertionError(f"flow run {run['state_type']}: {(run.get('state') or {}).get('message')}\n"
                                 + "\n".join(str(x.get("message"))[:400] for x in logs)
                                 + "\nserve stderr (tail):\n" + "".join(seen)[-3000:])
        assert run is not None and run["state_type"] == "COMPLETED", run
        # the run's page: its state and the WARNING about stale inputs, as the operator reads them
        browser.goto(f"http://127.0.0.1:{port}/runs/flow-run/{run['id']}")
        page = browser.wait_text("Completed", "shipped data: inputs", timeout_s=120)
        warning = next(ln for ln in page.splitlines() if "shipped data: inputs" in ln)
        assert " h old: the newest input (2025-03-" in warning and "older than the limit of 1 h" in warning
        logs = _post(f"{api}/logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}}, "limit": 200})
        stale = [r for r in logs if "inputs" in r["message"] and " h old" in r["message"]]
        assert [r["level"] for r in stale] == [30]  # one WARNING (30), once per run
        # the artifact's page: its first line is the age of the inputs
        arts = _post(f"{api}/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}})
        md = next(a for a in arts if a["key"] == "plan-summary-demo")
        first = md["data"].splitlines()[0]
        assert first.startswith("**inputs ") and " h old** (newest input: " in first
        browser.goto(f"http://127.0.0.1:{port}/artifacts/artifact/{md['id']}")
        shown = browser.wait_text(" h old (newest input: ", timeout_s=60)
        assert first.replace("**", "") in shown
        browser.screenshot(tmp_path / "prefect_artifact.png")
    finally:
        if serve is not None:
            _stop(serve)
        _stop(server)


@pytest.mark.heavy
def test_mlflow_forecaster_run_description_gives_the_analytic_ratio(tmp_path, browser, monkeypatch):
    env = _iso(tmp_path)
    for k in ("GPUPLAN_TRACKING_URI", "GPUPLAN_ARTIFACT_ROOT", "GPUPLAN_MODELS_DIR", "GPUPLAN_RUNS_DIR"):
        monkeypatch.setenv(k, env[k])
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from mlflow import MlflowClient

    from pipelines.config.settings import load_settings
    from pipelines.models import jobs as job_forecasters
    from pipelines.tracking import models as tracking_models
    from pipelines.tracking import store as tracking_store

    settings = load_settings()
    tracking_store.init_store(settings)
    job_forecasters.train_or_load(settings, "quantization")
    client = MlflowClient(tracking_uri=settings.tracking_uri, registry_uri=settings.tracking_uri)
    version = client.get_model_version_by_alias(tracking_models.registered_model_name("quantization"), "champion")
    run = client.get_run(version.run_id)
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    port = _free_port()
    log = tmp_path / "mlflow.log"
    ui = subprocess.Popen([str(VENV_BIN / "mlflow"), "ui", "--host", "127.0.0.1", "--port", str(port),
                           "--backend-store-uri", settings.tracking_uri, "--default-artifact-root",
                           str(settings.artifact_root)], env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                          start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", ui, log)
        browser.goto(f"http://127.0.0.1:{port}/#/experiments/{exp.experiment_id}/runs/{run.info.run_id}"
                     "?workflowType=machine_learning")
        text = browser.wait_text("× analytic baseline", "generated history", timeout_s=120)
        line = next(ln for ln in text.splitlines() if "× analytic baseline" in ln)
        assert "Holdout MAE 0.0826 h = 1.000 × analytic baseline (0.0826 h)" in line, line
        browser.screenshot(tmp_path / "mlflow_run.png")
    finally:
        _stop(ui)
