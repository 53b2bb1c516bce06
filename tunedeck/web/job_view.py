"""What the job page shows, gathered for its template: chart series, timeline, log tail, diagnosis, run files.

Charts are not embedded: the page's script reads each series from the metrics
API, downsampled on the server (LTTB, at most CHART_POINTS points whatever the
run's length), then appends what the event stream brings. Reading a long
series costs more than the rest of the page, so the page itself stays fast and
the charts fill in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tunedeck.api.context import ApiContext
from tunedeck.config.preference import is_preference_task
from tunedeck.core.errors import NotFoundError, StorageError
from tunedeck.core.states import JobState
from tunedeck.storage.base import job_prefix
from tunedeck.store.access import Actor
from tunedeck.store.models import Job, JobEvent
from tunedeck.store.resume_record import RESUME_EVENT
from tunedeck.web.locales.catalogue import marked
from tunedeck.web.preflight_view import PreflightRefusal, preflight_refusal, readable_report

CHART_POINTS = 2000
# A chart: (chart id, title, its series as (name, legend label)). The series names are those the engine
# writes in metric and eval events (`eval_` for evaluation, drawn dashed); training and evaluation loss
# share one chart so that overfitting shows where the two part.
ChartSpec = tuple[str, str, tuple[tuple[str, str], ...]]
CHARTS: tuple[ChartSpec, ...] = (
    ("loss", marked("Loss"), (("loss", marked("training loss")), ("eval_loss", marked("evaluation loss")))),
    ("learning_rate", marked("Learning rate"), (("learning_rate", marked("learning rate")),)),
    ("grad_norm", marked("Gradient norm"), (("grad_norm", marked("gradient norm")),)),
    ("tokens_per_second", marked("Tokens per second"), (("tokens_per_second", marked("tokens per second")),)),
)
# The preference tasks' charts, each shown once one of its series has a point (the names TRL's trainers log).
PREFERENCE_CHARTS: tuple[ChartSpec, ...] = (
    (
        "rewards",
        marked("Rewards: chosen vs rejected"),
        (
            ("rewards/chosen", marked("chosen")),
            ("rewards/rejected", marked("rejected")),
            ("eval_rewards/chosen", marked("eval chosen")),
            ("eval_rewards/rejected", marked("eval rejected")),
        ),
    ),
    (
        "reward-margins",
        marked("Reward margin"),
        (("rewards/margins", marked("train")), ("eval_rewards/margins", marked("eval"))),
    ),
    (
        "reward-accuracies",
        marked("Reward accuracy"),
        (("rewards/accuracies", marked("train")), ("eval_rewards/accuracies", marked("eval"))),
    ),
)
LOG_TAIL = 60
SYSTEM_EVENT = "system"
SYSTEM_POINTS = 1000  # the newest system samples the page charts (a run records at most 800)
# The readings of `system` events the page charts: (event field, title, unit). A machine without a
# device (or without its telemetry library) records only the host's, and only those are shown.
SYSTEM_SERIES: tuple[tuple[str, str, str], ...] = (
    ("cpu_percent", marked("Host CPU"), "%"),
    ("memory_used_mb", marked("Host memory used"), "MB"),
    ("device_utilization_pct", marked("Device use"), "%"),
    ("device_memory_used_mb", marked("Device memory used"), "MB"),
    ("device_temperature_c", marked("Device temperature"), "°C"),
    ("device_power_w", marked("Device power"), "W"),
)
TIMELINE_TYPES = ("phase", "checkpoint", "diagnosis", "result", RESUME_EVENT)
# The troubleshooting advice, for diagnoses that arrive without their own.
SEED_ADVICE: dict[str, tuple[str, list[str]]] = {
    "nan_loss": (
        marked("The loss is NaN"),
        [
            marked("Lower the learning rate (for example from 5e-5 to 1e-5)."),
            marked("Switch from fp16 to bf16, or use fp32."),
            marked("Check that the dataset has no empty or malformed examples."),
            marked("Enable gradient checkpointing to steady memory use."),
        ],
    ),
    "oom": (
        marked("Out of memory"),
        [
            marked("Reduce batch_size and raise gradient_accumulation_steps to compensate."),
            marked("Reduce max_length."),
            marked("Enable LoRA or QLoRA."),
            marked("Enable gradient checkpointing."),
            marked("Use mixed precision if training in fp32."),
        ],
    ),
    "loss_rising": (
        marked("The training loss is rising"),
        [
            marked("Lower the learning rate."),
            marked("Warm up for longer."),
            marked("Check the data for malformed or mislabelled examples."),
            marked("Train for fewer epochs, or keep the checkpoint from before the rise."),
        ],
    ),
    "loss_plateau": (
        marked("The training loss stopped falling early"),
        [
            marked("The learning rate may be too low."),
            marked("Check the data: answers removed by truncation or masked out leave nothing to learn."),
            marked("Compare with the baseline: the model may already do this task well."),
        ],
    ),
    "overfitting": (
        marked("Overfitting: the validation loss rises while the training loss falls"),
        [
            marked("Train for fewer epochs, or use early stopping with load_best_model_at_end."),
            marked("Add more training data."),
            marked("Regularise more (weight_decay, lora_dropout)."),
            marked("Lower the learning rate."),
        ],
    ),
    "guard_regression": (
        marked("The final model is worse than the baseline on a guarded metric"),
        [
            marked("Read the evaluation outputs for the examples that got worse."),
            marked("Lower the learning rate or train for fewer epochs."),
            marked("Add training examples of the behaviour the guard protects."),
        ],
    ),
    "no_update": (
        marked("Training never updated the weights"),
        [
            marked("Give the run more optimizer steps (more data, more epochs, or a smaller effective batch)."),
            marked("Lower warmup_ratio: the warmup starts at a learning rate of 0."),
        ],
    ),
    "slow": (
        marked("Training is slow"),
        [
            marked("Enable mixed precision."),
            marked("Raise the batch size if memory allows."),
            marked("Reduce max_length if your data is shorter."),
            marked("Check logging_steps: logging every step costs time."),
        ],
    ),
}
# How a preflight check's status reads in a table row (the job page and the job form's preflight alike).
CHECK_STATUS_LABELS = {
    "pass": marked("passed"),
    "warn": marked("warning"),
    "fail": marked("failed"),
    "skip": marked("skipped"),
}
# How a checkpoint's state reads in the checkpoints table.
CHECKPOINT_STATE_WORDS = {"written": marked("written"), "committed": marked("committed")}
ACTIONS_BY_STATE: dict[JobState, tuple[str, ...]] = {
    JobState.QUEUED: ("cancel",),
    JobState.RUNNING: ("pause", "cancel"),
    JobState.PAUSING: ("cancel",),
    JobState.PAUSED: ("resume", "cancel"),
    JobState.FAILED: ("resume",),
    JobState.CANCELLED: ("resume",),
    JobState.SUCCEEDED: (),
}


@dataclass(frozen=True)
class ExportChoice:
    """One export format as the job page offers it: what it is, in a line, and whether this job has it."""

    format: str  # the API's `ExportIn.format`
    title: str
    help: str
    available: bool = True


def export_choices(config: dict[str, Any] | None) -> list[ExportChoice]:
    """The export formats the job page offers for a job trained with `config`, in the API's order.

    The API accepts an adapter export of a full fine-tune, but it holds the whole model
    (the same files as the merged one): there is no adapter to offer, so it is shown disabled.
    """
    config = config or {}
    adapter_trained = bool(config.get("use_peft", True))
    qlora = adapter_trained and config.get("peft_method") == "qlora"
    if not adapter_trained:
        merged_help = marked("The fine-tuned model itself: load it with transformers.")
    elif qlora:
        merged_help = marked(
            "The adapter folded into its base model: one standalone model for transformers, as large as the base. A QLoRA adapter is merged onto the de-quantised base."  # noqa: E501 (one message)
        )
    else:
        merged_help = marked(
            "The adapter folded into its base model: one standalone model for transformers, as large as the base."
        )
    return [
        ExportChoice(
            "adapter",
            marked("Adapter"),
            marked("Only the weights this job trained (small); load them onto the same base model with peft.")
            if adapter_trained
            else marked("Not available: this job trained every weight, so there is no separate adapter."),
            available=adapter_trained,
        ),
        ExportChoice("merged", marked("Merged model") if adapter_trained else marked("Full model"), merged_help),
        ExportChoice(
            "bundle",
            marked("Bundle"),
            marked(
                "A .tar.gz with the model, its config, data manifests, metrics and model card, to archive or re-run."
            ),
        ),
        ExportChoice(
            "mlx",
            marked("MLX (Apple silicon)"),
            marked(
                "A folder mlx-lm opens on a Mac with Apple silicon: the merged model (optionally quantised), or the base model with the adapter beside it."  # noqa: E501 (one message)
            ),
        ),
    ]


@dataclass
class Diagnosis:
    """One problem a run reported, with what to do about it."""

    kind: str
    title: str
    message: str
    advice: list[str]
    step: int | None = None


@dataclass
class Distribution:
    """How the run spread over processes: the strategy, why, and each rank's host and device."""

    strategy: str
    cpu_offload: bool
    reason: str
    ranks: list[dict[str, Any]]


def distribution_from(run_config: dict[str, Any] | None) -> Distribution | None:
    """The distribution the run recorded in its config.json (None before it started, or from an older run)."""
    derived = (run_config or {}).get("derived")
    strategy = derived.get("strategy") if isinstance(derived, dict) else None
    if not isinstance(strategy, dict):
        return None
    ranks = derived.get("ranks") if isinstance(derived, dict) else None
    return Distribution(
        strategy=str(strategy.get("strategy") or "none"),
        cpu_offload=bool(strategy.get("cpu_offload")),
        reason=str(strategy.get("reason") or ""),
        ranks=[rank for rank in ranks or [] if isinstance(rank, dict)],
    )


@dataclass
class SystemSeries:
    """One system reading over the run: (seconds since the first sample, value) points, its latest and peak."""

    key: str
    title: str
    unit: str
    points: list[tuple[float, float]]

    @property
    def latest(self) -> float:
        """The newest value."""
        return self.points[-1][1]

    @property
    def peak(self) -> float:
        """The highest value."""
        return max(value for _, value in self.points)

    @property
    def mean(self) -> float:
        """The mean over the samples."""
        return sum(value for _, value in self.points) / len(self.points)


def system_series(events: list[JobEvent]) -> list[SystemSeries]:
    """The charted readings of `system` events (oldest first), timed from the first sample; readings never taken
    are left out."""
    if not events:
        return []
    origin = events[0].time
    found = []
    for key, title, unit in SYSTEM_SERIES:
        points = [
            (round((event.time - origin).total_seconds(), 1), float(value))
            for event in events
            if isinstance(value := event.payload.get(key), int | float) and not isinstance(value, bool)
        ]
        if points:
            found.append(SystemSeries(key, title, unit, points))
    return found


@dataclass
class JobPageData:
    """Everything the job page template needs besides the job row."""

    timeline: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    diagnoses: list[Diagnosis]
    last_event_id: int
    env: dict[str, Any] | None
    actions: tuple[str, ...]
    distribution: Distribution | None = None
    preflight: dict[str, Any] | None = None  # the checks before training of the newest attempt (preflight.json)
    check_status_labels: dict[str, str] = field(default_factory=lambda: dict(CHECK_STATUS_LABELS))
    charts: tuple[ChartSpec, ...] = CHARTS
    preference_charts: tuple[ChartSpec, ...] = ()
    refusal: PreflightRefusal | None = None  # set when the checks before training refused the job
    system: list[SystemSeries] = field(default_factory=list)  # host and device readings over the run
    system_origin: datetime | None = None  # when the first of them was taken (their charts count from it)
    extra: dict[str, Any] = field(default_factory=dict)


def client_charts(data: JobPageData, translate: Callable[[str], str] = str) -> list[dict[str, Any]]:
    """The page's charts as its script reads them, their titles and legends in the page's words (`translate`);
    a preference chart is optional (shown once it has a point)."""
    return [
        {
            "id": chart_id,
            "title": translate(title),
            "series": [[name, translate(label)] for name, label in series],
            "optional": optional,
        }
        for charts, optional in ((data.charts, False), (data.preference_charts, True))
        for chart_id, title, series in charts
    ]


def steps_per_epoch(config: dict[str, Any] | None, total_steps: int | None) -> float | None:
    """Optimizer steps per epoch from the planned total and the epochs, for charts whose points carry no epoch."""
    epochs = (config or {}).get("epochs")
    if not total_steps or not isinstance(epochs, int | float) or isinstance(epochs, bool) or epochs <= 0:
        return None
    return total_steps / epochs


def _recent_events(context: ApiContext, job_id: str, types: tuple[str, ...], limit: int) -> list[JobEvent]:
    """The newest `limit` events of these types, oldest first (the caller has checked the owner)."""
    return context.jobs.summaries.recent_events(job_id, types, limit)


def _last_event_id(context: ApiContext, job_id: str) -> int:
    return context.jobs.summaries.last_event_id(job_id)


def diagnosis_from(payload: dict[str, Any]) -> Diagnosis:
    """A diagnosis event (or the job's stored diagnosis) with the troubleshooting advice when it brings none."""
    kind = str(payload.get("kind") or "error")
    title, advice = SEED_ADVICE.get(kind, (kind.replace("_", " ").capitalize(), []))
    given = payload.get("advice")
    if isinstance(given, list) and given:
        advice = [str(item) for item in given]
    figures = payload.get("figures")
    # The quality diagnoses name their step among their figures (where the rise or the divergence began).
    step = payload.get("step", figures.get("step") if isinstance(figures, dict) else None)
    return Diagnosis(
        kind=kind,
        title=title,
        message=str(payload.get("message") or ""),
        advice=advice,
        step=step if isinstance(step, int) else None,
    )


def _run_record(context: ApiContext, job: Job, name: str) -> dict[str, Any] | None:
    """One JSON file of the run's record (env.json, config.json) once the worker stored it; None before.

    None too when storage cannot be read: the page shows what it has.
    """
    key = f"{job_prefix(job.owner_id, job.id)}/run/{name}"
    try:
        if not context.artifacts.exists(key):
            return None
        loaded = json.loads(context.artifacts.read_bytes(key))
    except (StorageError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _dataset_names(context: ApiContext, job: Job, viewer: Actor) -> dict[str, str]:
    """The job's datasets by the stem of their file on the worker (`train`, `validation`), as `viewer` reads them."""
    names = {}
    files = {"train": job.train_dataset_version_id, "validation": job.validation_dataset_version_id}
    for stem, version_id in files.items():
        if version_id is None:
            continue
        try:
            version = context.jobs.datasets.get_version(viewer, version_id)
            names[stem] = context.jobs.datasets.get_dataset(viewer, version.dataset_id).name
        except NotFoundError:  # deleted since: the file's own name will do
            continue
    return names


def _refusal(context: ApiContext, job: Job, datasets: dict[str, str]) -> PreflightRefusal | None:
    """Why the checks before training refused `job`, when its newest phase event says they did."""
    if job.state != JobState.FAILED.value:
        return None
    newest = context.jobs.summaries.recent_events(job.id, ("phase",), 1)
    if not newest:
        return None
    return preflight_refusal(newest[-1].payload, datasets)


def job_page_data(context: ApiContext, job: Job, viewer: Actor) -> JobPageData:
    """Gather the job page for `viewer` (the job was read with their scope, so its id is theirs to see)."""
    # The stream resumes after this id, and the script reads the series after the page loads: no point
    # falls between the two (a point in both is kept once: the script keys points by step).
    last_event_id = _last_event_id(context, job.id)
    events = _recent_events(context, job.id, (*TIMELINE_TYPES, "log"), LOG_TAIL * 2)
    timeline = [{"type": e.type, "time": e.time, "data": e.payload} for e in events if e.type in TIMELINE_TYPES]
    logs = [{"time": e.time, "data": e.payload} for e in events if e.type == "log"][-LOG_TAIL:]
    diagnoses = [diagnosis_from(e.payload) for e in events if e.type == "diagnosis"]
    if job.diagnosis and not diagnoses:
        diagnoses.append(diagnosis_from(job.diagnosis))
    datasets = _dataset_names(context, job, viewer)
    refusal = _refusal(context, job, datasets)
    samples = _recent_events(context, job.id, (SYSTEM_EVENT,), SYSTEM_POINTS)
    actions = ACTIONS_BY_STATE.get(JobState(job.state), ())
    if refusal is not None:
        # The refusal already says why: its raw error would only repeat it. Resuming runs the same checks on
        # the same inputs, so the page offers editing the config instead.
        diagnoses = [d for d in diagnoses if d.kind != "refused"]
        actions = tuple(action for action in actions if action != "resume")
    return JobPageData(
        timeline=timeline,
        logs=logs,
        diagnoses=diagnoses,
        last_event_id=last_event_id,
        env=_run_record(context, job, "env.json"),
        distribution=distribution_from(_run_record(context, job, "config.json")),
        preflight=readable_report(_run_record(context, job, "preflight.json"), datasets),
        actions=actions,
        refusal=refusal,
        preference_charts=PREFERENCE_CHARTS if is_preference_task(str((job.config or {}).get("task"))) else (),
        system=system_series(samples),
        system_origin=samples[0].time if samples else None,
    )
