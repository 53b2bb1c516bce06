"""A tunedeck server started as a person starts one, for benchmarks that talk to it over HTTP.

`served_app` migrates a scratch data dir, creates a user with an API token (as
`tunedeck users create` would), then runs `tunedeck serve` in its own process on
127.0.0.1 and a free port: SQLite and local storage in that data dir, the embedded
worker configured by the `TUNEDECK_*` variables given. The server's output goes to
`serve.log` in the data dir, whose tail is printed if it does not come up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 4000


@dataclass
class ServedApp:
    """A running `tunedeck serve` process and how to reach it."""

    base_url: str
    token: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def database_path(self) -> Path:
        """The server's SQLite file (its default place in the data dir)."""
        return self.data_dir / "tunedeck.db"

    def client(self, timeout_s: float = 60.0) -> httpx.Client:
        """An HTTP client on `/api/v1`, signed in with the user's token."""
        return httpx.Client(
            base_url=f"{self.base_url}/api/v1",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout_s,
        )

    def log_tail(self) -> str:
        """The end of the server's output (for error messages)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return ""


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_user_token(data_dir: Path, name: str) -> str:
    """Migrate the data dir's database and create user `name`; returns its API token.

    A user existing before `serve` starts means no bootstrap admin token is printed, so
    the benchmark never has to read one from the server's terminal output.
    """
    from tunedeck.core.settings import Settings
    from tunedeck.service.users.bootstrap import prepare_database
    from tunedeck.store.store import JobStore

    settings = Settings(data_dir=data_dir)
    prepare_database(settings)
    with JobStore.open(settings.resolved_database_url(), migrate=False) as store:
        user = store.users.create_user(name)
        token, _ = store.users.issue_token(user, "benchmark")
    return token


@contextmanager
def served_app(data_dir: Path, environment: Mapping[str, str], *, workers: int = 1) -> Iterator[ServedApp]:
    """`tunedeck serve --workers N` on a free loopback port with `data_dir`; stopped (drained) on exit."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = create_user_token(data_dir, "bench")
    port = free_port()
    env = {
        **os.environ,
        **environment,
        "TUNEDECK_DATA_DIR": str(data_dir),
        "TUNEDECK_HOST": "127.0.0.1",
        "TUNEDECK_PORT": str(port),
        # The server imports this checkout's code, whatever package the interpreter has installed.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    log_path = data_dir / "serve.log"
    command = [sys.executable, "-m", "tunedeck.cli.main", "serve", "--workers", str(workers), "--log-level", "warning"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    app = ServedApp(f"http://127.0.0.1:{port}", token, data_dir, process, log_path)
    try:
        wait_until_healthy(app)
        yield app
    finally:
        stop(app)


def wait_until_healthy(app: ServedApp, timeout_s: float = START_TIMEOUT_S) -> None:
    """Return once `/api/v1/health` answers 200; RuntimeError (with the server's log) otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if app.process.poll() is not None:
            raise RuntimeError(f"the server exited with {app.process.returncode}:\n{app.log_tail()}")
        try:
            if httpx.get(f"{app.base_url}/api/v1/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer within {timeout_s:.0f} s:\n{app.log_tail()}")


def stop(app: ServedApp) -> None:
    """SIGTERM (the server drains its worker), then SIGKILL if it does not exit in time."""
    if app.process.poll() is not None:
        return
    app.process.terminate()
    try:
        app.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        app.process.kill()
        app.process.wait()
