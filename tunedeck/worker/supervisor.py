"""The worker loop: take back expired leases, claim work that fits, run each piece in its own thread.

Jobs (`train` items) and other work (exports, preflights, inspections, generations,
ingestions) come from the one work queue; a worker runs up to `max_concurrent_jobs`
jobs and `max_concurrent_work` other items at once, never two on the same device.

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
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import FrameType

from tunedeck.core.file_modes import protect_private_paths
from tunedeck.core.ids import new_id
from tunedeck.core.settings import Settings
from tunedeck.service.privacy.key_checks import verify_encryption_keys
from tunedeck.service.privacy.retention_plan import plan_retention
from tunedeck.service.privacy.retention_sweep import apply_retention
from tunedeck.storage.base import ArtifactStore, stored_bytes_of_user
from tunedeck.storage.encryption import Keyring
from tunedeck.storage.factory import open_store_from_settings
from tunedeck.store.fencing import TRAIN
from tunedeck.store.retention import RetentionBounds
from tunedeck.store.store import JobStore
from tunedeck.store.work_items import WORK_KINDS
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.execution import JobExecution, job_placement
from tunedeck.worker.fork_server_client import ForkServerClient
from tunedeck.worker.ray_engine import RayCluster, runs_on_ray
from tunedeck.worker.sweeper import WorkerFolders, sweep_worker_folders
from tunedeck.worker.work_runner import WorkExecution

log = logging.getLogger(__name__)


# A fork server that died is started again this many times over a worker's life; past that
# (something kills it over and over) the worker's runs start afresh, which always works.
FORK_SERVER_RESTARTS = 3


def parse_devices(spec: str, visible: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Device ids from a declaration: `2` (a count), `0,1` or `GPU-1f2e,GPU-9a8b` (ids), `` or `0` (none).

    A count takes the first ids of `visible` (what the machine shows), else 0..count-1.
    A single id needs a trailing comma (`3,`), since a bare number is a count.
    """
    text = spec.strip()
    if not text:
        return ()
    if text.isdigit():
        count = int(text)
        ids = visible or tuple(str(index) for index in range(count))
        if count > len(ids):
            raise ValueError(f"{count} devices declared, but only {len(ids)} visible ({','.join(ids)})")
        return ids[:count]
    ids = tuple(item.strip() for item in text.split(",") if item.strip())
    if len(set(ids)) != len(ids):
        raise ValueError(f"device ids repeat: {text!r}")
    return ids


def detect_devices(declared: str | None = None) -> tuple[str, ...]:
    """Accelerator ids this machine offers, from the environment alone (the worker never imports torch).

    `declared` (`tunedeck worker --devices`, else the `TUNEDECK_WORKER_DEVICES` setting) wins; otherwise
    CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES, then the NVIDIA device files. CPU-only
    machines offer none and run jobs that need none.
    """
    visible = _visible_devices()
    if declared is not None:
        return parse_devices(declared, visible)
    return visible


def _visible_devices() -> tuple[str, ...]:
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        value = os.environ.get(name)
        if value is not None:
            ids: list[str] = []
            for item in (part.strip() for part in value.split(",")):
                if not item or item == "-1":
                    break  # CUDA ignores everything from an invalid entry on
                ids.append(item)
            return tuple(ids)
    suffixes = (path.name[len("nvidia") :] for path in Path("/dev").glob("nvidia[0-9]*"))
    return tuple(str(number) for number in sorted(int(s) for s in suffixes if s.isdigit()))


class Worker:
    """Claims and runs jobs and work items until `ctx.stop` is set; no two of them hold the same device."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._running: dict[str, threading.Thread] = {}
        self._work: dict[str, threading.Thread] = {}
        # Devices held by running jobs and work items, by job or item id.
        self._devices_in_use: dict[str, tuple[str, ...]] = {}
        # `running_jobs` may be read from another thread (the API next to an embedded worker).
        self._lock = threading.Lock()
        self._fork_server: ForkServerClient | None = None
        self.fork_server_restarts = 0
        # Folder sweeps: the first pass sweeps, then every sweep_interval_s and after each job ends.
        self._next_sweep = 0.0
        self._job_ended = False

    def run_forever(self, idle_wait_s: float = 1.0) -> None:
        """Loop until stopped; on drain, wait for the running jobs to hand their work back."""
        # Now, not at the first claim: the engine imports while the worker waits for work.
        self._started_fork_server()
        while not self.ctx.stop.is_set():
            self.run_once()
            self.ctx.stop.wait(idle_wait_s if not self._has_capacity() else self.ctx.poll_s)
        for thread in [*self._running.values(), *self._work.values()]:
            thread.join()
        self._reap()
        self.close()

    def close(self) -> None:
        """Stop the fork server and the generation process, if they run (no job or work item may be running)."""
        self.ctx.generation.close()
        if self._fork_server is not None:
            self._fork_server.close()
            self._fork_server = None

    def run_once(self) -> bool:
        """One pass: requeue expired leases, claim at most one job and one work item; True when a job started."""
        self._reap()
        self._sweep_if_due()
        self.ctx.store.queue.requeue_expired()
        if self.ctx.drain.is_set():
            return False
        started = self._start_job()
        self._start_work()
        return started

    def _start_job(self) -> bool:
        if not self._has_capacity():
            return False
        free = self.free_devices
        cluster = self.ctx.ray_cluster
        # In front of a Ray cluster, a job may need as many devices as one of its nodes has.
        reachable = max(len(free), cluster.gpus_per_machine) if cluster is not None else len(free)
        # Owners at their storage limit wait; storage is measured here, outside the claim's transaction.
        over_storage = self.ctx.store.quotas.owners_over_storage(partial(stored_bytes_of_user, self.ctx.artifacts))
        item = self.ctx.store.queue.claim(
            self.ctx.worker_id,
            (TRAIN,),
            reachable,
            self.ctx.lease_s,
            skip_owners=over_storage,
            machines=self.ctx.machines,
        )
        if item is None or item.job is None:
            return False
        claimed = item.job
        on_ray = runs_on_ray(cluster, job_placement(claimed.config), len(free))
        devices = () if on_ray else free[: claimed.devices_needed]  # the cluster's devices are Ray's to place
        if devices:
            # The generation process keeps models on the accelerators it sees: a job that takes
            # accelerators gets them without those weights (it loads them again on a later prompt).
            self.ctx.generation.release()
        log.info(
            "worker %s claimed job %s (attempt %d) on devices [%s]",
            self.ctx.worker_id,
            claimed.job_id,
            claimed.attempt,
            ",".join(devices),
        )
        execution = JobExecution(self.ctx, claimed, devices, fork_server=self._started_fork_server(), on_ray=on_ray)
        thread = threading.Thread(
            target=self._run, args=(f"job {claimed.job_id}", execution.run), name=f"job-{claimed.job_id}"
        )
        with self._lock:
            self._running[claimed.job_id] = thread
            self._devices_in_use[claimed.job_id] = devices
        thread.start()
        return True

    def _start_work(self) -> bool:
        """Claim one work item (export, preflight, inspection, generation) if a work slot is free."""
        with self._lock:
            if len(self._work) >= self.ctx.max_concurrent_work:
                return False
        free = self.free_devices
        claimed = self.ctx.store.queue.claim(self.ctx.worker_id, WORK_KINDS, len(free), self.ctx.lease_s)
        if claimed is None:
            return False
        devices = free[: claimed.devices_needed]
        if devices:
            # The generation process keeps models on the accelerators it sees: a job that takes
            # accelerators gets them without those weights (it loads them again on a later prompt).
            self.ctx.generation.release()
        log.info("worker %s claimed %s item %s on devices [%s]", self.ctx.worker_id, claimed.kind,
                 claimed.item_id, ",".join(devices))  # fmt: skip
        execution = WorkExecution(self.ctx, claimed)
        what = f"{claimed.kind} item {claimed.item_id}"
        thread = threading.Thread(target=self._run, args=(what, execution.run), name=f"work-{claimed.item_id}")
        with self._lock:
            self._work[claimed.item_id] = thread
            self._devices_in_use[claimed.item_id] = devices
        thread.start()
        return True

    def _started_fork_server(self) -> ForkServerClient | None:
        """The fork server, started from this loop's thread (which outlives every run).

        One that died is started again, up to FORK_SERVER_RESTARTS times; one that refused
        to serve (it found itself unsafe to fork) is not. Without a server, runs start afresh.
        The runs a dead server had forked died with it: their clients report them as killed.
        """
        if not self.ctx.fork_server:
            return None
        server = self._fork_server
        restartable = server is not None and not server.alive and not server.refused
        if server is not None and restartable and self.fork_server_restarts < FORK_SERVER_RESTARTS:
            server.close()  # reap it
            self.fork_server_restarts += 1
            log.warning(
                "fork server of worker %s is gone; starting it again (%d of %d)",
                self.ctx.worker_id,
                self.fork_server_restarts,
                FORK_SERVER_RESTARTS,
            )
            server = None
        if server is None:
            log_path = self.ctx.runs_dir / f"fork-server-{self.ctx.worker_id}.log"
            server = self._fork_server = ForkServerClient.start(self.ctx.child_env, log_path)
        return server if server.alive else None

    @staticmethod
    def _run(what: str, run: Callable[[], object]) -> None:
        """One attempt at a job or a work item, in its own thread; an error never takes the worker down."""
        try:
            state = run()
            log.info("%s ended its attempt as %s", what, state)
        except Exception:
            # The lease will expire and another attempt will run; the worker stays up.
            log.exception("%s: worker error", what)

    def _reap(self) -> None:
        """Forget ended jobs; their devices become free (the job's thread outlives its engine child)."""
        with self._lock:
            for running in (self._running, self._work):
                for key, thread in list(running.items()):
                    if not thread.is_alive():
                        del running[key]
                        self._devices_in_use.pop(key, None)
                        self._job_ended = self._job_ended or running is self._running

    def _sweep_if_due(self) -> None:
        """Remove the folders nothing needs any more, when the interval is up or a job just ended.

        Runs on the loop's thread, between claims, so a job or item claimed later cannot be
        missed by the running sets it is given. A failed sweep is logged; the worker goes on.
        """
        interval = self.ctx.sweep_interval_s
        if interval is None:
            return
        with self._lock:
            due = self._job_ended or time.monotonic() >= self._next_sweep
            self._job_ended = False
        if not due:
            return
        self._next_sweep = time.monotonic() + interval
        folders = WorkerFolders.of(self.ctx, self.running_jobs, self.running_work)
        now = datetime.now(UTC)
        try:
            report = sweep_worker_folders(folders, now=now, keep_run_hours=self.ctx.keep_run_hours)
        except Exception:
            log.exception("worker %s: the folder sweep failed", self.ctx.worker_id)
            return
        if report.removed or report.errors:
            log.info("worker %s: %s", self.ctx.worker_id, report.summary())
        if self.ctx.retention is not None:
            self._apply_retention(now, self.ctx.retention)

    def _apply_retention(self, now: datetime, bounds: RetentionBounds) -> None:
        """Carry out what owners' retention policies make due now (every worker may: each action checks again)."""
        try:
            actions = plan_retention(self.ctx.store, now=now, bounds=bounds)
            records = apply_retention(self.ctx.store, self.ctx.artifacts, actions, now=now)
        except Exception:
            log.exception("worker %s: the retention sweep failed", self.ctx.worker_id)
            return
        for record in records:
            log.info("worker %s: retention removed %s: %s (%s)", self.ctx.worker_id, record["where"],
                     record["what"], record["count"])  # fmt: skip

    def _has_capacity(self) -> bool:
        self._reap()
        return len(self._running) < self.ctx.max_concurrent_jobs

    @property
    def free_devices(self) -> tuple[str, ...]:
        """This worker's devices that no running job holds, in declared order."""
        self._reap()
        with self._lock:
            taken = {device for devices in self._devices_in_use.values() for device in devices}
        return tuple(device for device in self.ctx.devices if device not in taken)

    @property
    def running_work(self) -> list[str]:
        """Ids of the work items this worker is running now."""
        self._reap()
        with self._lock:
            return list(self._work)

    @property
    def running_jobs(self) -> list[str]:
        """Ids of the jobs this worker is running now."""
        self._reap()
        with self._lock:
            return list(self._running)


def build_context(
    settings: Settings,
    *,
    store: JobStore | None = None,
    artifacts: ArtifactStore | None = None,
    max_concurrent_jobs: int = 1,
    worker_id: str | None = None,
    devices: str | None = None,
    ray_address: str | None = None,
) -> WorkerContext:
    """A worker context from settings (opening the store and storage unless given).

    `devices` declares the accelerators as `tunedeck worker --devices` does (see
    `parse_devices`); None takes the settings' `worker_devices`, else detects them. `ray_address`
    is the Ray cluster for jobs across several machines: it is read once here, and a
    RayClusterError says why it cannot be used (Ray not installed, nobody answering at the
    address) before the worker claims anything.
    """
    declared = devices if devices is not None else settings.worker_devices
    device_ids = detect_devices(declared)  # first: a bad declaration fails before any connection opens
    protect_private_paths(settings.data_dir)
    runs_dir = settings.resolved_runs_dir()
    ray_cluster = RayCluster.probe(ray_address, runs_dir / "work") if ray_address else None
    jobs = store or JobStore.open(settings.resolved_database_url())
    try:
        verify_encryption_keys(jobs, Keyring.from_settings(settings))  # before it reads or seals anything
    except BaseException:
        if store is None:
            jobs.close()
        raise
    return WorkerContext(
        worker_id=worker_id or f"{socket.gethostname()}-{os.getpid()}-{new_id()[-6:]}",
        store=jobs,
        artifacts=artifacts or open_store_from_settings(settings),
        runs_dir=runs_dir,
        devices=device_ids,
        machines=ray_cluster.machines if ray_cluster is not None else 1,
        max_concurrent_jobs=max_concurrent_jobs,
        max_concurrent_work=settings.work_slots,
        lease_s=settings.lease_seconds,
        heartbeat_s=max(0.2, min(5.0, settings.lease_seconds / 4)),
        keep_checkpoints=settings.keep_checkpoints,
        cache_dir=settings.worker_cache_dir(),
        generation_cache_bytes=settings.generation_cache_bytes,
        trackers=settings.tracker_destinations(),
        system_sample_s=settings.system_sample_seconds,
        memory_cap=settings.memory_cap,
        # Engine processes get the tracker secrets from their environment, never from a run spec on disk.
        child_env=settings.tracker_environment(),
        # Only without accelerators: a fork must never carry CUDA state into a run.
        fork_server=settings.engine_fork_server and not device_ids,
        ray_address=ray_address,
        ray_cluster=ray_cluster,
        keep_run_hours=settings.keep_run_folders_hours,
        sweep_interval_s=settings.sweep_interval_s,
        retention=RetentionBounds.from_settings(settings),
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
