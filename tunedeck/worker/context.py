"""What every part of a worker shares: its identity, the store, the artifact storage and its timings."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.retention import RetentionBounds
from tunedeck.store.store import JobStore
from tunedeck.worker.generation_process import GenerationProcess
from tunedeck.worker.ray_engine import RayCluster

DEFAULT_GENERATION_CACHE_BYTES = 4 * 1024**3


@dataclass
class WorkerContext:
    """A worker's identity, connections and timings.

    `devices` are the accelerator ids this worker may hand to its jobs (as
    CUDA_VISIBLE_DEVICES names them). `stop` is set to end the worker; `drain`
    (set by SIGTERM) additionally asks every running job to checkpoint and go
    back to the queue. `generation` is the worker's long-lived generation process
    (started on the first generate item), keeping up to `generation_cache_bytes` of
    model weights loaded; the worker closes it when it stops. `ray_address` is the
    Ray cluster jobs across several machines run on (None: this worker runs none), and
    `ray_cluster` what that cluster offered when the worker started.
    """

    worker_id: str
    store: JobStore
    artifacts: ArtifactStore
    runs_dir: Path
    devices: tuple[str, ...] = ()
    # Machines one run may span: 1, or the nodes of the Ray cluster the worker submits to.
    machines: int = 1
    max_concurrent_jobs: int = 1
    # Work items (exports, preflights, inspections, generations) run beside the jobs, in their own slots.
    max_concurrent_work: int = 2
    lease_s: float = 30.0
    heartbeat_s: float = 5.0
    poll_s: float = 0.5
    keep_checkpoints: int = 2
    cache_dir: Path | None = None
    child_env: dict[str, str] = field(default_factory=dict)
    # Where the experiment trackers of jobs' report_to write (None: under each run's folder).
    trackers: TrackerDestinations | None = None
    # Seconds between a run's system samples (host and device readings; 0: none).
    system_sample_s: float = 15.0
    # The simulated memory cap runs are checked and trained under (a size such as 24GiB; None: the device's).
    memory_cap: str | None = None
    ray_address: str | None = None
    ray_cluster: RayCluster | None = None
    # Fork runs from a server that imported the engine once (CPU-only workers; see fork_server_client).
    fork_server: bool = False
    generation_cache_bytes: int = DEFAULT_GENERATION_CACHE_BYTES
    generation: GenerationProcess = field(default_factory=GenerationProcess)
    # Hours a finished job's run folder is kept; sweeps every `sweep_interval_s` and after each job
    # (None: this worker never sweeps, as in a context built by hand; `build_context` sets both).
    keep_run_hours: float = 0.0
    sweep_interval_s: float | None = None
    # The operator's bounds on owners' retention policies; with them, each sweep also carries out
    # the retention plan that is due (None: this worker applies none, as in a context built by hand).
    retention: RetentionBounds | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    drain: threading.Event = field(default_factory=threading.Event)
