"""What `mixed_precision: auto` will run in, told on the job form from the hardware the workers reported.

The dashboard does not look at any accelerator itself: each worker's newest successful checks
before training (a preflight work item of this user) carry the hardware it ran on, and the
precision rule is the engine's own (`tunedeck.core.precision`). Without such a report the form
states the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedeck.core.precision import AUTO_RULE, auto_precision_of
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.jobs.access import Actor
from tunedeck.jobs.store import JobStore

SCANNED_ITEMS = 50  # the user's newest preflight items are enough to know each worker in use
SHOWN_WORKERS = 3


def _worker_line(worker_id: str, hardware: Mapping[str, Any]) -> str:
    device = str(hardware.get("device_name") or hardware.get("backend") or "unknown device")
    return f"{auto_precision_of(hardware)} on worker {worker_id} ({device})"


def auto_precision_note(store: JobStore, actor: Actor) -> str:
    """One sentence: what `auto` resolves to on each worker that reported its hardware, or the rule itself."""
    lines: dict[str, str] = {}
    for item in store.work.list_items(actor, kinds=[WorkKind.PREFLIGHT.value], limit=SCANNED_ITEMS):
        report = (item.result or {}).get("report")
        hardware = report.get("hardware") if isinstance(report, dict) else None
        if item.state != WorkState.SUCCEEDED.value or not isinstance(hardware, dict) or not item.worker_id:
            continue
        lines.setdefault(item.worker_id, _worker_line(item.worker_id, hardware))  # newest first: the first wins
        if len(lines) == SHOWN_WORKERS:
            break
    if not lines:
        return AUTO_RULE
    return "; ".join(lines.values()) + " (from the newest checks before training each worker ran)"
