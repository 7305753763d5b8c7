"""The temporary Prefect API server of ``gpuplan run``, started before the heavy imports (issue 29).

Without ``PREFECT_API_URL`` Prefect 3.9 starts its temporary server only when the flow is called
(``prefect.client.orchestration.get_client`` -> ``prefect.server.api.server.SubprocessASGIServer.start``): the
main process first imports prefect, mlflow, lightgbm, statsmodels and the optimizer, then imports
``prefect.server`` (FastAPI, the ORM) just to launch the server, then waits while the server process imports the
same server code and checks its database. :class:`EarlyServer` launches that same server command (uvicorn on
``prefect.server.api.server:create_app`` with ``PREFECT__SERVER_EPHEMERAL=1``, UI off, 127.0.0.1, a free port)
as the first thing ``gpuplan run`` does, *without importing prefect*, and sets ``PREFECT_API_URL`` to it before
prefect is imported: the server's start-up runs beside the main process's imports, MLflow store check and
ingest checks, and the flow run is an ordinary run against a server (its logs and artifacts go there). The
server uses the ephemeral database chosen by :func:`pipelines.config.settings.apply_env_defaults` and is stopped
by its process id when the command ends, as Prefect's own temporary server is.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

#: Environment of the server process, as Prefect 3.9's ``SubprocessASGIServer._run_uvicorn_command`` sets it.
SERVER_ENV: dict[str, str] = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                              "PREFECT__SERVER_FINAL": "1"}
#: Seconds to wait for ``/health``; the settings default of gpuplan (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``).
DEFAULT_TIMEOUT_S = 120.0
#: Launch attempts when the chosen port was taken between choosing and binding.
ATTEMPTS = 3


def wanted() -> bool:
    """True when ``gpuplan run`` should start its own early server: no ``PREFECT_API_URL`` and ephemeral mode on.

    ``PREFECT_SERVER_ALLOW_EPHEMERAL_MODE=false`` (Prefect's switch off ephemeral mode) or
    ``GPUPLAN_EARLY_SERVER=0`` leaves everything to Prefect.
    """
    if os.environ.get("PREFECT_API_URL", "").strip():
        return False
    if os.environ.get("GPUPLAN_EARLY_SERVER", "1") == "0":
        return False
    return os.environ.get("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "true").strip().lower() not in ("0", "false", "no")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the operating system reports free now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EarlyServer:
    """One temporary Prefect API server process on 127.0.0.1 (module docstring).

    ``start()`` returns at once (the process starts in the background); ``wait_ready()`` blocks until
    ``GET /api/health`` answers 200; ``stop()`` terminates the process by its id (SIGTERM, SIGKILL after 5 s).
    """

    def __init__(self) -> None:
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._ready = False

    @property
    def api_url(self) -> str:
        """The server's API address, ``http://127.0.0.1:<port>/api``."""
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> EarlyServer:
        """Launch the server process (no wait) and register :meth:`stop` at exit; returns ``self``."""
        self.port = free_port()
        self.process = subprocess.Popen(_command(self.port), env={**os.environ, **SERVER_ENV},
                                        stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        return self

    def wait_ready(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Block until the server answers ``/health`` with 200 (relaunching on a taken port).

        Raises:
            RuntimeError: the server did not answer within ``timeout_s`` seconds or its process exited.
        """
        if self._ready:
            return
        deadline = time.monotonic() + timeout_s
        attempts = 1
        while time.monotonic() < deadline:
            assert self.process is not None, "start() first"
            code = self.process.poll()
            if code is not None:
                if attempts >= ATTEMPTS:
                    raise RuntimeError(f"the temporary Prefect server on port {self.port} exited with code {code}")
                attempts += 1
                self.start()
                continue
            try:
                with urllib.request.urlopen(self.api_url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        self._ready = True
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the temporary Prefect server on port {self.port} did not answer /health within "
                           f"{timeout_s:.0f} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")

    def stop(self) -> None:
        """Stop the server process by its id; safe to call twice."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _command(port: int) -> list[str]:
    """Prefect 3.9's temporary-server command line (``SubprocessASGIServer._run_uvicorn_command``) for ``port``.

    ``--app-dir`` is the folder that holds the ``prefect`` package, found without importing it.
    """
    import importlib.util

    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        raise RuntimeError("prefect is not installed")
    app_dir = Path(spec.origin).parent.parent
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
            "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on"]


def start_if_wanted() -> EarlyServer | None:
    """Start an :class:`EarlyServer` and point ``PREFECT_API_URL`` at it when :func:`wanted`; else None.

    Call before prefect is imported (Prefect reads ``PREFECT_API_URL`` into its settings at import).
    """
    if not wanted():
        return None
    server = EarlyServer().start()
    os.environ["PREFECT_API_URL"] = server.api_url
    return server
