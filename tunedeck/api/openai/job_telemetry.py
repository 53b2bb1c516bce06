"""A job's events and checkpoints in the client's shapes (`FineTuningJobEvent`, `FineTuningJobCheckpoint`).

Metric and eval events are `type: "metrics"` events whose `data` holds the step and the
losses in the client's names (`train_loss` is tunedeck's `loss`, `valid_loss` its
`eval_loss`); every other event is a message. A checkpoint's metrics are the job's
telemetry at its step (the newest value of each series at or before it).
"""

from __future__ import annotations

from typing import Any

from tunedeck.api.openai.schemas.fine_tuning import CheckpointOut, JobEventOut
from tunedeck.api.schemas.common import SQL_INT_MAX
from tunedeck.store.models import Checkpoint, JobEvent

EVENT_ID_PREFIX = "ftevent-"
# The client's checkpoint metrics, and the tunedeck series each one is read from.
CHECKPOINT_SERIES = {
    "train_loss": "loss",
    "valid_loss": "eval_loss",
    "train_mean_token_accuracy": "mean_token_accuracy",
    "valid_mean_token_accuracy": "eval_mean_token_accuracy",
}
_METRIC_TYPES = frozenset({"metric", "eval"})
# Fields of an event that say nothing to the client: the envelope (paths on a worker's disk are dropped too).
_ENVELOPE = frozenset({"type", "time"})
_LEVELS = {"warning": "warn", "warn": "warn", "error": "error", "critical": "error"}


def event_id(event: JobEvent) -> str:
    """The event's id under `/v1`."""
    return f"{EVENT_ID_PREFIX}{event.id}"


def parse_event_id(text: str) -> int | None:
    """The database id an event id names, or None when `text` is not an event id."""
    digits = text.removeprefix(EVENT_ID_PREFIX)
    if not (text.startswith(EVENT_ID_PREFIX) and digits.isdigit() and digits.isascii()):
        return None
    return min(int(digits), SQL_INT_MAX)  # inside the database's 64-bit ids, and past every event


def _shown(key: str) -> bool:
    """Whether an event field is shown: not the envelope, nor a path on the worker's disk (`path`, `run_dir`)."""
    return key not in _ENVELOPE and key != "path" and not key.endswith(("_path", "_dir"))


def _metrics_data(payload: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"step": payload.get("step")}
    for key, value in payload.items():
        if not _shown(key) or key == "step":
            continue
        name = {"loss": "train_loss", "eval_loss": "valid_loss"}.get(key, key)
        data[name] = value
    return data


def _message(kind: str, payload: dict[str, Any]) -> str:
    step = payload.get("step")
    if kind == "metric":
        loss = payload.get("loss")
        return f"Step {step}: training loss={loss:.4f}" if isinstance(loss, int | float) else f"Step {step}"
    if kind == "eval":
        loss = payload.get("eval_loss")
        return f"Step {step}: validation loss={loss:.4f}" if isinstance(loss, int | float) else f"Step {step}"
    if kind == "checkpoint":
        return f"Checkpoint written at step {step}"
    if kind == "phase":
        return f"{payload.get('name', 'phase')}: {payload.get('status', '')}".strip(": ")
    if kind == "result":
        return "The run finished"
    return str(payload.get("message") or kind)


def event_out(event: JobEvent) -> JobEventOut:
    """One tunedeck job event as the client's FineTuningJobEvent (the module docstring says how)."""
    payload = dict(event.payload or {})
    metrics = event.type in _METRIC_TYPES
    if event.type == "diagnosis":
        level = "warn"
    elif event.type == "phase" and payload.get("status") == "failed":
        level = "error"
    else:
        level = _LEVELS.get(str(payload.get("level", "")).lower(), "info")
    data = _metrics_data(payload) if metrics else {k: v for k, v in payload.items() if _shown(k)}
    return JobEventOut(
        id=event_id(event),
        created_at=int(event.time.timestamp()),
        level=level,  # type: ignore[arg-type]
        message=_message(event.type, payload),
        type="metrics" if metrics else "message",
        data=data or None,
    )


def checkpoint_out(checkpoint: Checkpoint, model_name: str, telemetry: dict[str, float | None]) -> CheckpointOut:
    """A committed checkpoint as the client's FineTuningJobCheckpoint; `telemetry` maps series to values at its step."""
    metrics: dict[str, float] = {"step": float(checkpoint.step)}
    for name, series in CHECKPOINT_SERIES.items():
        value = telemetry.get(series)
        if value is not None:
            metrics[name] = float(value)
    return CheckpointOut(
        id=checkpoint.id,
        created_at=int((checkpoint.committed_at or checkpoint.created_at).timestamp()),
        fine_tuned_model_checkpoint=model_name,
        fine_tuning_job_id=checkpoint.job_id,
        metrics=metrics,
        step_number=checkpoint.step,
    )
