"""Creating (or reopening, on resume) the run directory, all-or-nothing.

Everything is checked before the directory appears: it is assembled in a hidden sibling
and renamed into place, so an error before training leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.rundir import RunDir

_CHECKPOINT_STATE = "trainer_state.json"
_STOP_FILE = "STOP"


def check_out_dir(out_dir: Path, resuming: bool) -> None:
    """A new run needs a missing or empty folder; a resumed one may reuse its own run directory."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ConfigError([Issue("exists and is not a folder", field="--out", file=str(out_dir))])
    if not [entry for entry in out_dir.iterdir() if entry.name != _STOP_FILE]:
        return  # empty, or holding only a stop request written before the run started
    if resuming and RunDir(out_dir).config.is_file():
        return
    raise ConfigError(
        [
            Issue(
                "the run folder already holds files; choose a new folder, or pass --resume-from to continue it",
                field="--out",
                file=str(out_dir),
            )
        ]
    )


def check_checkpoint(checkpoint: Path) -> None:
    """A resumable checkpoint folder holds the trainer state beside the weights."""
    if not checkpoint.is_dir():
        raise ConfigError([Issue("checkpoint folder not found", field="--resume-from", file=str(checkpoint))])
    if not (checkpoint / _CHECKPOINT_STATE).is_file():
        raise ConfigError(
            [
                Issue(
                    "not a complete checkpoint",
                    field="--resume-from",
                    file=str(checkpoint),
                    expected=f"a checkpoint-<step> folder with {_CHECKPOINT_STATE}",
                )
            ]
        )


def check_resume_config(run_dir: RunDir, config_doc: dict[str, Any]) -> None:
    """Resuming into an existing run directory needs the config the run started with.

    A key the stored config lacks was added to tunedeck after the run started: the run
    trained with what that key's default does, so the default is what it must still be.
    """
    stored = json.loads(run_dir.config.read_text(encoding="utf-8")).get("config", {})
    started_with = {**_defaults_of_keys_missing_from(stored), **stored}
    changed = sorted(
        key for key in set(started_with) | set(config_doc) if started_with.get(key) != config_doc.get(key)
    )
    if changed:
        raise ConfigError(
            [
                Issue(
                    "differs from the config the run started with; a resumed run must keep its config",
                    field=key,
                    file=str(run_dir.config),
                    expected=json.dumps(started_with.get(key)),
                    found=json.dumps(config_doc.get(key)),
                )
                for key in changed
            ]
        )


def _defaults_of_keys_missing_from(stored: dict[str, Any]) -> dict[str, Any]:
    """JSON defaults of the config keys `stored` does not name (keys added since it was written)."""
    from tunedeck.config.training import TrainingConfig

    defaults = TrainingConfig().to_json_dict()
    return {key: value for key, value in defaults.items() if key not in stored}


def create_run_dir(out_dir: Path, documents: dict[str, Any]) -> RunDir:
    """Write `documents` (file name → JSON) into a fresh run directory that appears complete at once."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for name, document in documents.items():
            write_json_atomic(staging / name, document)
        (staging / "checkpoints").mkdir()
        if out_dir.exists():
            # A stop request may arrive before the run directory exists; it must survive the swap.
            stop = out_dir / _STOP_FILE
            if stop.is_file():
                os.replace(stop, staging / _STOP_FILE)
            out_dir.rmdir()  # an empty folder the caller made; rename cannot replace it otherwise
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunDir(out_dir)
