"""Running one claimed job: prepare inputs, launch the engine child, supervise it, record the outcome.

The worker, not the training child, heartbeats the lease: a `LeaseKeeper` thread does,
from the first step of the attempt to its last (inputs, training, final uploads). Every
write to the store carries the job's fencing token: a worker that lost its lease
(another worker claimed the job after it stalled) can no longer change anything.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.config.distribution import Placement, placement
from tunedeck.config.loading import validate_config
from tunedeck.core.checkpoint_parts import missing_parts
from tunedeck.core.errors import TunedeckError
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.failpoints import failpoint
from tunedeck.core.launcher import launched_exit_code, ray_engine_command
from tunedeck.core.metric_direction import greater_is_better
from tunedeck.core.rundir import RunDir
from tunedeck.core.states import JobState
from tunedeck.storage.base import checkpoint_prefix, final_prefix, job_prefix
from tunedeck.store.lease_keeper import LeaseKeeper
from tunedeck.store.models import Checkpoint
from tunedeck.store.records import ClaimedJob, MetricPoint, NewEvent
from tunedeck.store.train_policy import JobEnd
from tunedeck.worker.background_commits import BackgroundCommitter, PendingCheckpoint
from tunedeck.worker.child_process import EngineChild, RunningEngine, device_env
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.error_text import without_worker_paths
from tunedeck.worker.fork_server_client import ForkServerClient
from tunedeck.worker.ingest import EventIngestor
from tunedeck.worker.inputs import JobOwner, prepare_inputs
from tunedeck.worker.ray_engine import RayPlanError, plan_for

log = logging.getLogger(__name__)

# How long a child gets to write its pause checkpoint before it is killed.
STOP_GRACE_S = 600.0
RUN_RECORD_FILES = (
    "results.json",
    "config.json",
    "env.json",
    "data_manifest.json",
    "preflight.json",
    "baseline_eval.json",
    "final_eval.json",
    "events.jsonl",
)
# Written once, together, when the engine creates the run directory (it appears complete at
# once): uploaded as soon as they exist, so exports of a job still running (or killed) have them.
RUN_START_FILES = ("config.json", "env.json", "data_manifest.json", "preflight.json")


@dataclass
class _Best:
    """The best value of the job's ranking metric among its committed checkpoints, all attempts included."""

    metric: str
    greater_is_better: bool
    value: float | None = None

    def seed(self, committed: Iterable[Checkpoint]) -> None:
        """Start from the checkpoints earlier attempts committed, so a resume cannot crown a worse one."""
        for row in committed:
            value = (row.metrics or {}).get(self.metric)
            self.improves(value if isinstance(value, int | float) else None)

    def improves(self, value: float | None) -> bool:
        if value is None:
            return False
        if self.value is None or (value > self.value if self.greater_is_better else value < self.value):
            self.value = value
            return True
        return False


class JobExecution:
    """One attempt at one job on this worker."""

    def __init__(
        self,
        ctx: WorkerContext,
        claimed: ClaimedJob,
        devices: tuple[str, ...] = (),
        *,
        fork_server: ForkServerClient | None = None,
        on_ray: bool | None = None,
    ) -> None:
        self.ctx = ctx
        self.fork_server = fork_server
        self.job = claimed
        self.token = claimed.fencing_token
        self.devices = devices
        self.attempt_dir = ctx.runs_dir / claimed.job_id / f"attempt-{claimed.attempt}"
        self.placement = job_placement(claimed.config)
        # On the worker's Ray cluster (see `runs_on_ray`); by default, exactly the jobs across machines.
        self.on_ray = self.placement.machines > 1 if on_ray is None else on_ray
        metric = str(claimed.config.get("metric_for_best_model", "eval_loss"))
        # Eval events name metrics as the trainer does ("eval_loss"); the config may say "loss".
        metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        self.best = _Best(metric, greater_is_better(metric))
        # From the rows, not from this attempt alone: after a resume the first evaluated
        # checkpoint must beat the earlier attempts' best before it may replace it.
        self.best.seed(ctx.store.checkpoints.committed(claimed.job_id))
        self.lease = LeaseKeeper(
            lambda: ctx.store.queue.heartbeat(claimed.item_id, claimed.fencing_token, ctx.lease_s),
            ctx.heartbeat_s,
            name=f"lease-{claimed.job_id}",
        )
        self._start_record_uploaded = False

    @property
    def lost_lease(self) -> bool:
        """Whether a heartbeat found the token stale: another attempt owns the job now."""
        return self.lease.lost.is_set()

    # -- the attempt ---------------------------------------------------------------

    def run(self) -> JobState | None:
        """Run the attempt to its end; returns the state the job was left in (None if the lease was lost)."""
        self.lease.start()
        try:
            return self._run_attempt()
        finally:
            self.lease.stop()

    def _run_attempt(self) -> JobState | None:
        if self.attempt_dir.exists():
            shutil.rmtree(self.attempt_dir)  # a previous try of this very attempt number crashed
        self.attempt_dir.mkdir(parents=True)
        try:
            inputs = prepare_inputs(
                self.ctx.store,
                self.ctx.artifacts,
                self.job,
                self.attempt_dir,
                self.ctx.cache_dir,
                self.ctx.trackers,
                system_sample_s=self.ctx.system_sample_s,
                memory_cap=self.ctx.memory_cap,
            )
        except TunedeckError as error:
            return self._finish(JobState.FAILED, error=f"could not prepare the job's inputs: {error}")
        if self.lost_lease:
            return None  # the inputs took longer than the lease could be kept: another attempt runs
        run_dir = RunDir(inputs.run_dir)
        try:
            child = self._start_engine(inputs.spec_path, self.attempt_dir / "engine.log")
        except RayPlanError as error:
            return self._finish(JobState.FAILED, error=str(error))
        ingestor = EventIngestor(run_dir.events, self._store_events)
        committer = BackgroundCommitter(self._commit_checkpoint, name=f"commit-{self.job.job_id}")
        try:
            exit_code = self._exit_code(self._supervise(child, run_dir, ingestor, committer))
        finally:
            # On a worker error the child must not outlive its attempt: its devices are freed next.
            child.kill()
        # Lines written just before the child exited (a pause's checkpoint among them).
        self._take_events(ingestor.poll(), run_dir, ingestor, committer)
        commit_errors = committer.close()
        if self.lost_lease:
            return None
        if commit_errors:
            return self._finish(JobState.FAILED, error=f"checkpoint upload failed: {commit_errors[0]}")
        return self._record_outcome(exit_code, child, run_dir, ingestor)

    def _start_engine(self, spec_path: Path, log_path: Path) -> RunningEngine:
        """Fork the run from the fork server when there is one, else start a fresh engine process (or several).

        The fork server's runs see the worker's devices, so only a one-process run that reserves
        none and hides none is forked.
        """
        placement = self.placement
        if self.on_ray:
            return self._start_ray_driver(spec_path, log_path)
        devices = device_env(self.devices, hide=placement.hide_devices)
        if self.fork_server is not None and not devices and placement.processes == 1:
            forked = self.fork_server.launch(spec_path, log_path)
            if forked is not None:
                return forked
        return EngineChild.start(
            spec_path,
            log_path,
            env={**self.ctx.child_env, **devices},
            processes=placement.processes,
            outcome_path=self.outcome_path,
        )

    def _start_ray_driver(self, spec_path: Path, log_path: Path) -> RunningEngine:
        """A job across machines: the Ray driver runs its ranks on the worker's Ray cluster (RayPlanError if not)."""
        plan = plan_for(self.ctx.ray_cluster, self.job.config)
        address = self.ctx.ray_address or "auto"  # set whenever ray_cluster is (build_context)
        command = ray_engine_command(spec_path, self.outcome_path, address, plan.workers, plan.use_gpu)
        log.info("job %s: %d Ray Train workers on %s (%s)", self.job.job_id, plan.workers, address,
                 "one GPU each" if plan.use_gpu else "CPU")  # fmt: skip
        return EngineChild.start(spec_path, log_path, env=dict(self.ctx.child_env), command=command)

    @property
    def outcome_path(self) -> Path:
        """Where rank 0 of a multi-process run writes its exit status (its launcher's own is 0 or 1)."""
        return self.attempt_dir / "outcome.json"

    def _exit_code(self, launcher_code: int) -> int:
        """The run's exit status: the launcher's, or on several processes the one rank 0 wrote."""
        if self.placement.world_size <= 1:
            return launcher_code
        # A launcher that exited 0 while rank 0 never said how the run ended: a failure.
        return launched_exit_code(self.outcome_path, launcher_code, unreported=ExitCode.FAILED)

    def _supervise(
        self, child: RunningEngine, run_dir: RunDir, ingestor: EventIngestor, committer: BackgroundCommitter
    ) -> int:
        stop_sent: str | None = None
        stop_deadline = float("inf")
        while True:
            self._take_events(ingestor.poll(), run_dir, ingestor, committer)
            code = child.poll()
            if code is not None:
                return code
            if self.lost_lease:
                log.warning("job %s: lease lost, stopping its engine", self.job.job_id)
                child.kill()
                return child.wait()
            beat = self.lease.latest
            wanted = (beat.requested_action if beat else None) or ("pause" if self.ctx.drain.is_set() else None)
            if wanted and stop_sent != wanted:
                run_dir.root.mkdir(parents=True, exist_ok=True)
                run_dir.stop_request.write_text(wanted, encoding="utf-8")
                stop_sent = wanted
                stop_deadline = time.monotonic() + (STOP_GRACE_S if wanted == "pause" else 30.0)
            if time.monotonic() > stop_deadline:
                child.kill()
            time.sleep(self.ctx.poll_s)

    def _take_events(
        self, events: list[dict[str, Any]], run_dir: RunDir, ingestor: EventIngestor, committer: BackgroundCommitter
    ) -> None:
        """Upload the run's start record once it exists, then queue each new checkpoint for commit."""
        if self.lost_lease:
            return  # the attempt that took the job over writes its record and checkpoints
        if not self._start_record_uploaded and run_dir.config.is_file():
            # Before any checkpoint of this attempt is submitted: a committed checkpoint
            # always has its run's config, environment and data manifest beside it.
            self._start_record_uploaded = self._upload_run_files(run_dir, RUN_START_FILES)
        for event in events:
            if event.get("type") == "checkpoint":
                step = int(event["step"])
                metrics = ingestor.eval_by_step.get(step, {})
                parts = int(event.get("parts") or 1)
                committer.submit(PendingCheckpoint(step=step, path=Path(event["path"]), metrics=metrics, parts=parts))

    # -- store writes (all fenced) ---------------------------------------------------

    def _store_events(self, events: list[NewEvent], points: list[MetricPoint]) -> None:
        telemetry = self.ctx.store.telemetry
        telemetry.append_events(self.job.job_id, self.job.attempt, events, token=self.token)
        if points:
            telemetry.append_metrics(self.job.job_id, points, token=self.token)

    def _commit_checkpoint(self, checkpoint: PendingCheckpoint) -> None:
        # One prefix per (step, attempt): a worker that lost its lease but is still uploading can
        # never overwrite the files of the attempt that took the job over.
        step_prefix = checkpoint_prefix(self.job.owner_id, self.job.job_id, checkpoint.step)
        prefix = f"{step_prefix}-attempt-{self.job.attempt}"
        checkpoints = self.ctx.store.checkpoints
        metrics = {k: v for k, v in checkpoint.metrics.items() if k not in ("type", "time")}
        missing = missing_parts(checkpoint.path, checkpoint.parts)
        if missing:
            # Never committed: a resume from it would miss those ranks' state.
            log.warning("job %s: checkpoint %d lacks the part of rank(s) %s; not committed",
                        self.job.job_id, checkpoint.step, ",".join(map(str, missing)))  # fmt: skip
            return
        failpoint("worker_before_upload")
        if not checkpoints.record_written(self.job.job_id, self.token, checkpoint.step, prefix, metrics=metrics):
            return
        manifest = self.ctx.artifacts.commit_directory(checkpoint.path, prefix)
        failpoint("worker_after_manifest")
        value = metrics.get(self.best.metric)
        is_best = self.best.improves(value if isinstance(value, int | float) else None)
        job_id, step = self.job.job_id, checkpoint.step
        if not checkpoints.mark_committed(job_id, self.token, step, manifest.digest, is_best=is_best):
            return
        failpoint("worker_after_commit")
        self._delete_uncommitted_uploads(step_prefix, keep=prefix)
        for removed in checkpoints.prune(self.job.job_id, self.token, self.ctx.keep_checkpoints):
            self.ctx.artifacts.delete_prefix(removed.storage_prefix)

    def _delete_uncommitted_uploads(self, step_prefix: str, keep: str) -> None:
        """Remove this step's uploads by earlier attempts that died before committing them."""
        folder = step_prefix.rpartition("/")[0]
        depth = folder.count("/") + 2  # segments of "<folder>/<checkpoint folder>"
        stale = {
            "/".join(key.split("/")[:depth])
            for key in self.ctx.artifacts.list(folder)
            if key.startswith(f"{step_prefix}-attempt-") and not key.startswith(f"{keep}/")
        }
        for prefix in sorted(stale):
            self.ctx.artifacts.delete_prefix(prefix)

    # -- outcome ---------------------------------------------------------------------

    def _record_outcome(
        self, exit_code: int, child: RunningEngine, run_dir: RunDir, ingestor: EventIngestor
    ) -> JobState | None:
        if exit_code == ExitCode.SUCCEEDED:
            try:
                self._upload_results(run_dir)
            except TunedeckError as error:
                return self._finish(JobState.FAILED, error=f"final model upload failed: {error}")
            return self._finish(JobState.SUCCEEDED)
        if exit_code in (ExitCode.PAUSED, ExitCode.CANCELLED) and run_dir.root.is_dir():
            self._upload_run_files(run_dir)  # a stopped run's record, for exports of its checkpoints
        if exit_code == ExitCode.PAUSED:
            if self._current_state() is JobState.PAUSING:
                return self._finish(JobState.PAUSED)
            # Paused on the worker's own request (SIGTERM drain): back to the queue, not to a person.
            return self._release()
        if exit_code == ExitCode.CANCELLED:
            return self._finish(JobState.CANCELLED)
        if exit_code == ExitCode.REQUEUE and self.placement.machines > 1:
            # The Ray cluster could not carry the run (unreachable, too small, the group lost before
            # its first checkpoint): not the job's fault. Back to the queue, for a fresh attempt.
            log.warning("job %s: the Ray cluster could not carry the run; back to the queue", self.job.job_id)
            if run_dir.root.is_dir():
                self._upload_run_files(run_dir)
            return self._release()
        if child.lost_with_server:
            # The fork server died and took the run with it: the worker's fault, not the job's.
            # Back to the queue, to resume from its newest checkpoint (the server is started
            # again, a bounded number of times, so this cannot loop for ever).
            log.warning("job %s: its run died with the fork server; back to the queue", self.job.job_id)
            if run_dir.root.is_dir():
                self._upload_run_files(run_dir)
            return self._release()
        if run_dir.root.is_dir():
            self._upload_run_files(run_dir)  # a failed run's record explains the failure
        lines = child.last_lines(20)
        diagnosis = _diagnosis_payload(ingestor.last_diagnosis, exit_code)
        text = str(diagnosis["message"]) + ("\n--- last output ---\n" + "\n".join(lines) if lines else "")
        return self._finish(JobState.FAILED, error=text, diagnosis=diagnosis)

    def _upload_results(self, run_dir: RunDir) -> None:
        if run_dir.final.is_dir():
            self.ctx.artifacts.commit_directory(run_dir.final, final_prefix(self.job.owner_id, self.job.job_id))
        self._upload_run_files(run_dir)
        self._pin_base_model(run_dir)

    def _upload_run_files(self, run_dir: RunDir, names: tuple[str, ...] = RUN_RECORD_FILES) -> bool:
        """The run's record (config, environment, data, evaluations, results), kept for reports and exports.

        False when storage refused a file: the record is worth retrying, never worth failing the job for.
        """
        prefix = job_prefix(self.job.owner_id, self.job.job_id)
        try:
            for name in names:
                path = run_dir.root / name
                if path.is_file():
                    self.ctx.artifacts.put_file(f"{prefix}/run/{name}", path)
        except (TunedeckError, OSError) as error:
            log.warning("job %s: could not store the run record: %s", self.job.job_id, error)
            return False
        return True

    def _pin_base_model(self, run_dir: RunDir) -> None:
        """Record the commit or fingerprint the engine actually loaded on the base model row."""
        if self.job.base_model_id is None or not run_dir.config.is_file():
            return
        model = json.loads(run_dir.config.read_text(encoding="utf-8")).get("model", {})
        resolved = model.get("revision") if model.get("source") == "hub" else model.get("fingerprint")
        if resolved:
            self.ctx.store.base_models.pin(JobOwner(self.job.owner_id), self.job.base_model_id, str(resolved))

    def _finish(
        self, state: JobState, *, error: str | None = None, diagnosis: dict[str, Any] | None = None
    ) -> JobState | None:
        error = without_worker_paths(
            error, {self.attempt_dir: "<the attempt's folder>", self.ctx.runs_dir: "<the worker's runs folder>"}
        )
        end = JobEnd(state, error=error, diagnosis=diagnosis)
        done = self.ctx.store.queue.finish(self.job.item_id, self.token, end)
        return state if done else None

    def _release(self) -> JobState | None:
        """Give the job back to the queue (`paused` / `cancelled` when a person asked); None if the lease was lost."""
        state = self.ctx.store.queue.release(self.job.item_id, self.token)
        return JobState(state) if state is not None else None

    def _current_state(self) -> JobState | None:
        beat = self.ctx.store.queue.heartbeat(self.job.item_id, self.token, self.ctx.lease_s)
        return beat.state if beat.ok else None


def _diagnosis_payload(diagnosis: dict[str, Any] | None, exit_code: int) -> dict[str, Any]:
    """The engine's own diagnosis, or, when it died without one, what its exit status tells."""
    if diagnosis is not None:
        payload = json.loads(json.dumps({k: v for k, v in diagnosis.items() if k != "time"}, default=str))
        if not payload.get("message"):
            payload["message"] = f"the training process exited with code {exit_code}"
        return dict(payload)
    if exit_code < 0:
        name = _signal_name(-exit_code)
        advice = (
            ["SIGKILL with no diagnosis is most often the kernel's out-of-memory killer: check `dmesg`; "
             "lower batch_size or max_length, or give the worker more memory.",
             "Resume the job: it continues from its newest committed checkpoint."]
            if name == "SIGKILL"
            else ["Resume the job: it continues from its newest committed checkpoint."]
        )
        message = f"the training process was killed by {name} before it could report why"
        return {"kind": "crash", "exit_code": exit_code, "signal": name, "message": message, "advice": advice}
    return {
        "kind": "crash",
        "exit_code": exit_code,
        "message": f"the training process exited with code {exit_code} and no diagnosis",
        "advice": ["Read the last output below; resume the job once the cause is fixed."],
    }


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def job_placement(config: dict[str, Any]) -> Placement:
    """Where the job's processes run, from its stored config (one process when the config no longer validates)."""
    try:
        return placement(validate_config(dict(config)))
    except TunedeckError:
        # The engine refuses such a config with the reason; the worker only needs to launch it.
        return Placement(devices=0, processes=1, machines=1, hide_devices=False)
