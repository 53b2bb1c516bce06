"""Whether a resumed run moved to another platform, which makes the method run the checks before training again.

A run records its platform's fingerprint (`environment_fingerprint`) in env.json. A resume on a
platform whose fingerprint differs (another device, driver, torch, CUDA/ROCm or transformers)
runs preflight again, and says why: "platform changed: torch 2.13.0 → 2.14.1". The new
fingerprint then replaces the recorded one, with the change kept in env.json's
`platform_changes`, so a further resume on the new platform does not check again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.rundir import CHECKPOINT_ENV
from tunedeck.engine.host.environment import FINGERPRINT_LABELS, environment_fingerprint
from tunedeck.engine.host.hardware import HardwareProfile, detect_hardware

ENV_FILE = "env.json"


def recorded_fingerprint(run_dir: Path, checkpoint: Path | None = None) -> dict[str, Any] | None:
    """The fingerprint of the platform the run was on, or None (none recorded, or written before fingerprints).

    The checkpoint resumed from carries a copy of the run's env.json: a job resumed on another
    worker starts in a new folder, so that copy is the one to compare with; the run folder's
    env.json is the record when the checkpoint has none (a resume in the same folder).
    """
    path = Path(run_dir) / ENV_FILE
    if checkpoint is not None and (Path(checkpoint) / CHECKPOINT_ENV).is_file():
        path = Path(checkpoint) / CHECKPOINT_ENV
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    fingerprint = document.get("fingerprint") if isinstance(document, dict) else None
    return fingerprint if isinstance(fingerprint, dict) else None


def platform_change(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """ "platform changed: torch 2.13.0 → 2.14.1" (every differing key), or None when they agree."""
    changes = [
        f"{label} {recorded.get(key) or 'none'} → {current.get(key) or 'none'}"
        for key, label in FINGERPRINT_LABELS.items()
        if recorded.get(key) != current.get(key)
    ]
    return "platform changed: " + ", ".join(changes) if changes else None


def resume_platform_change(
    run_dir: Path, hardware: HardwareProfile | None = None, checkpoint: Path | None = None
) -> str | None:
    """Why a run resumed into `run_dir` from `checkpoint` must be checked again here, or None when it need not.

    None when the recorded fingerprint matches this platform's, and when none is recorded (a run
    started before fingerprints were recorded: there is nothing to compare with).
    """
    recorded = recorded_fingerprint(run_dir, checkpoint)
    if recorded is None:
        return None
    return platform_change(recorded, environment_fingerprint(hardware or detect_hardware()))


def record_platform(run_dir: Path, reason: str, hardware: HardwareProfile | None = None) -> None:
    """Write this platform's fingerprint into env.json after a re-check, keeping the change and its reason."""
    path = Path(run_dir) / ENV_FILE
    document = json.loads(path.read_text(encoding="utf-8"))
    current = environment_fingerprint(hardware or detect_hardware())
    change = {"from": document.get("fingerprint"), "to": current, "reason": reason}
    document["platform_changes"] = [*document.get("platform_changes", []), change]
    document["fingerprint"] = current
    write_json_atomic(path, document)
