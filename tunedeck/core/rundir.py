"""The run directory contract: what the engine reads and writes for one run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
# The run's resolved config, copied into every checkpoint and the final model so each travels with it.
CHECKPOINT_CONFIG = "tunedeck_config.json"
# The run's env.json, copied into every checkpoint: a resume elsewhere compares its platform with it.
CHECKPOINT_ENV = "tunedeck_env.json"


@dataclass(frozen=True)
class RunDir:
    """Paths inside a run directory; everything a run needs to be reproduced or resumed."""

    root: Path

    @property
    def config(self) -> Path:
        """The resolved config, with derived values."""
        return self.root / "config.json"

    @property
    def env(self) -> Path:
        """Package versions, accelerator, host."""
        return self.root / "env.json"

    @property
    def data_manifest(self) -> Path:
        """sha256 and row counts of every dataset used."""
        return self.root / "data_manifest.json"

    @property
    def events(self) -> Path:
        """Append-only event log."""
        return self.root / "events.jsonl"

    @property
    def checkpoints(self) -> Path:
        """Folder of `checkpoint-<step>` folders."""
        return self.root / "checkpoints"

    @property
    def final(self) -> Path:
        """The final model or adapter."""
        return self.root / "final"

    @property
    def results(self) -> Path:
        """Final metrics and summary."""
        return self.root / "results.json"

    @property
    def stop_request(self) -> Path:
        """Written by a supervisor to ask the run to stop: contains `pause` or `cancel`."""
        return self.root / "STOP"

    @property
    def oom_restart(self) -> Path:
        """Written by a process of a multi-process run that ran out of memory: the micro-batch to restart with."""
        return self.root / "oom-restart.json"

    def checkpoint(self, step: int) -> Path:
        """Folder of the checkpoint at `step`."""
        return self.checkpoints / f"checkpoint-{step}"

    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """Checkpoint folders present on disk, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = []
        for child in self.checkpoints.iterdir():
            match = CHECKPOINT_PATTERN.match(child.name)
            if match and child.is_dir():
                found.append((int(match.group(1)), child))
        return sorted(found)
