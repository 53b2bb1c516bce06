"""What `mixed_precision: auto` will run in, told on the job form from the hardware the workers reported.

The dashboard does not look at any accelerator itself: each worker's newest successful checks
before training (a preflight work item of this user) carry the hardware it ran on, and the
precision rule is the engine's own (`tunedeck.core.precision`). Without such a report the form
states the rule. The note is made of messages that the form shows in its language.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunedeck.core.precision import auto_precision_of
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.store.access import Actor
from tunedeck.store.store import JobStore
from tunedeck.web.locales.catalogue import Message, marked

SCANNED_ITEMS = 50  # the user's newest preflight items are enough to know each worker in use
SHOWN_WORKERS = 3
# `tunedeck.core.precision.AUTO_RULE` as a message of the dashboard (a test keeps the two equal).
AUTO_RULE_WORDS = marked("bf16 where the GPU supports it, else fp16, else fp32 (decided on the worker)")


@dataclass(frozen=True)
class AutoPrecisionNote:
    """What `auto` runs in on each worker that reported (the page joins the lines with "; "), else the rule."""

    workers: list[Message]
    rule: str = AUTO_RULE_WORDS
    from_checks: str = marked("{workers} (from the newest checks before training each worker ran)")


def _worker_line(worker_id: str, hardware: Mapping[str, Any]) -> Message:
    device = hardware.get("device_name") or hardware.get("backend")
    values = {"precision": auto_precision_of(hardware), "worker": worker_id, "device": device}
    if not device:
        return Message(marked("{precision} on worker {worker} (unknown device)"), values)
    return Message(marked("{precision} on worker {worker} ({device})"), values)


def auto_precision_note(store: JobStore, actor: Actor) -> AutoPrecisionNote:
    """What `auto` resolves to on each worker that reported its hardware; none: the form states the rule."""
    lines: dict[str, Message] = {}
    for item in store.work.list_items(actor, kinds=[WorkKind.PREFLIGHT.value], limit=SCANNED_ITEMS):
        report = (item.result or {}).get("report")
        hardware = report.get("hardware") if isinstance(report, dict) else None
        if item.state != WorkState.SUCCEEDED.value or not isinstance(hardware, dict) or not item.worker_id:
            continue
        lines.setdefault(item.worker_id, _worker_line(item.worker_id, hardware))  # newest first: the first wins
        if len(lines) == SHOWN_WORKERS:
            break
    return AutoPrecisionNote(list(lines.values()))
