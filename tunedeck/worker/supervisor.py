"""The worker loop: take back expired leases, claim jobs that fit, run each in its own thread.

`tunedeck worker` runs it in the foreground; `tunedeck serve` embeds it in a
thread next to the API. SIGTERM drains: every running job checkpoints and goes
back to the queue, then the worker exits.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from pathlib import Path
from types import FrameType

from tunedeck.core.ids import new_id
from tunedeck.core.settings import Settings
from tunedeck.jobs.store import JobStore
from tunedeck.storage.base import ArtifactStore
from tunedeck.storage.factory import open_store
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.execution import JobExecution

log = logging.getLogger(__name__)


def detect_devices() -> int:
    """Accelerators this machine offers, from the environment alone (the worker never imports torch).

    `TUNEDECK_WORKER_DEVICES` wins; otherwise CUDA_VISIBLE_DEVICES, then the
    NVIDIA device files. CPU-only machines offer 0 and run jobs that need none.
    """
    explicit = os.environ.get("TUNEDECK_WORKER_DEVICES")
    if explicit is not None:
        return int(explicit)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return len([p for p in Path("/dev").glob("nvidia[0-9]*")])


class Worker:
    """Claims and runs jobs until `ctx.stop` is set."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._running: dict[str, threading.Thread] = {}

    def run_forever(self, idle_wait_s: float = 1.0) -> None:
        """Loop until stopped; on drain, wait for the running jobs to hand their work back."""
        while not self.ctx.stop.is_set():
            self.run_once()
            self.ctx.stop.wait(idle_wait_s if not self._has_capacity() else self.ctx.poll_s)
        for thread in list(self._running.values()):
            thread.join()

    def run_once(self) -> bool:
        """One pass: requeue expired leases and claim at most one job; True when a job was started."""
        self._reap()
        self.ctx.store.queue.requeue_expired()
        if self.ctx.drain.is_set() or not self._has_capacity():
            return False
        claimed = self.ctx.store.queue.claim(self.ctx.worker_id, self.ctx.devices, self.ctx.lease_s)
        if claimed is None:
            return False
        log.info("worker %s claimed job %s (attempt %d)", self.ctx.worker_id, claimed.job_id, claimed.attempt)
        thread = threading.Thread(
            target=self._run_job, args=(JobExecution(self.ctx, claimed),), name=f"job-{claimed.job_id}"
        )
        self._running[claimed.job_id] = thread
        thread.start()
        return True

    def _run_job(self, execution: JobExecution) -> None:
        try:
            state = execution.run()
            log.info("job %s ended its attempt as %s", execution.job.job_id, state)
        except Exception:
            # The job's lease will expire and another attempt will run; the worker stays up.
            log.exception("job %s: worker error", execution.job.job_id)

    def _reap(self) -> None:
        for job_id, thread in list(self._running.items()):
            if not thread.is_alive():
                del self._running[job_id]

    def _has_capacity(self) -> bool:
        self._reap()
        return len(self._running) < self.ctx.max_concurrent_jobs

    @property
    def running_jobs(self) -> list[str]:
        """Ids of the jobs this worker is running now."""
        self._reap()
        return list(self._running)


def build_context(
    settings: Settings,
    *,
    store: JobStore | None = None,
    artifacts: ArtifactStore | None = None,
    max_concurrent_jobs: int = 1,
    worker_id: str | None = None,
) -> WorkerContext:
    """A worker context from settings (opening the store and storage unless given)."""
    return WorkerContext(
        worker_id=worker_id or f"{socket.gethostname()}-{os.getpid()}-{new_id()[-6:]}",
        store=store or JobStore.open(settings.resolved_database_url()),
        artifacts=artifacts
        or open_store(settings.resolved_storage_url(), s3_endpoint_url=settings.s3_endpoint_url),
        runs_dir=(settings.data_dir / "runs").resolve(),
        devices=detect_devices(),
        max_concurrent_jobs=max_concurrent_jobs,
        lease_s=settings.lease_seconds,
        heartbeat_s=max(0.2, min(5.0, settings.lease_seconds / 4)),
        keep_checkpoints=settings.keep_checkpoints,
        cache_dir=settings.resolved_cache_dir(),
    )


def install_drain_on_sigterm(ctx: WorkerContext) -> None:
    """SIGTERM: ask running jobs to checkpoint and requeue, then stop (main thread only)."""

    def _drain(signum: int, frame: FrameType | None) -> None:
        log.warning("SIGTERM: checkpointing running jobs and handing them back to the queue")
        ctx.drain.set()
        ctx.stop.set()

    signal.signal(signal.SIGTERM, _drain)


def start_embedded_worker(ctx: WorkerContext) -> threading.Thread:
    """Run a worker in a daemon thread next to the API (`tunedeck serve`)."""
    worker = Worker(ctx)
    thread = threading.Thread(target=worker.run_forever, name="embedded-worker", daemon=True)
    thread.start()
    return thread
