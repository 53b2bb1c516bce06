"""Running `tunedeck worker` as a real process that a test can SIGKILL together with its engine child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

HOOKS_DIR = Path(__file__).parent / "failpoint_hooks"


def start_worker_process(
    *, worker_id: str, data_dir: Path, database_url: str, storage_url: str, s3_endpoint: str | None,
    failpoints: str = "", failpoint_state: Path | None = None, lease_seconds: float = 3.0,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a worker in its own session, so `kill_worker` reaches it and its engine child at once.

    Its output goes to `<data_dir>/<worker_id>.log`; `extra_env` adds or overrides variables.
    """
    env = {
        **os.environ,
        "TUNEDECK_DATA_DIR": str(data_dir),
        "TUNEDECK_DATABASE_URL": database_url,
        "TUNEDECK_STORAGE_URL": storage_url,
        "TUNEDECK_FAILPOINTS": failpoints,
        "TUNEDECK_FAILPOINT_STATE": str(failpoint_state or data_dir / "failpoints"),
        "PYTHONUNBUFFERED": "1",
        # These tests read a run's folder after its job ended; the worker's sweep would remove it.
        "TUNEDECK_KEEP_RUN_FOLDERS_HOURS": "24",
    }
    if s3_endpoint:
        env["TUNEDECK_S3_ENDPOINT_URL"] = s3_endpoint
    env.update(extra_env or {})
    log = open(data_dir / f"{worker_id}.log", "ab")  # noqa: SIM115 - owned by the process
    return subprocess.Popen(
        [sys.executable, "-m", "tunedeck.cli.main", "worker", "--worker-id", worker_id,
         "--lease-seconds", str(lease_seconds)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_worker(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker and its engine child together (they share a process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def with_failpoint_hooks() -> dict[str, str]:
    """Environment that loads the test-only kill point inside the trainer's save (see failpoint_hooks/)."""
    hooks = str(HOOKS_DIR)
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{hooks}{os.pathsep}{existing}" if existing else hooks}
