"""What an export (or a generation) reads: a model folder, and the run documents that describe it.

A model folder is training's `final/`, a `checkpoints/checkpoint-<step>/`, or any folder
saved with `save_pretrained` (an earlier export). Run documents are the run directory's
JSON files; a job downloaded from storage has the same names under its `run/` folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.rundir import RunDir
from tunedeck.engine.models.pinning import ADAPTER_CONFIG_FILE, RUN_CONFIG_FILE

RUN_DOCUMENTS = ("config.json", "env.json", "data_manifest.json", "results.json")
EVAL_DOCUMENTS = ("baseline_eval.json", "final_eval.json")


@dataclass(frozen=True)
class ModelFolder:
    """A saved model or adapter, where it came from (`final` or `step-<n>`), and its run documents' folder."""

    path: Path
    label: str
    run_root: Path | None = None

    @property
    def is_adapter(self) -> bool:
        """Whether the folder holds a peft adapter rather than full weights."""
        return (self.path / ADAPTER_CONFIG_FILE).is_file()

    @property
    def step(self) -> int | None:
        """The checkpoint step, None for the final model."""
        return int(self.label.removeprefix("step-")) if self.label.startswith("step-") else None


@dataclass
class RunDocuments:
    """The JSON documents of a run that exist (missing ones stay empty)."""

    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    data_manifest: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    baseline_eval: dict[str, Any] | None = None
    final_eval: dict[str, Any] | None = None
    diagnoses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def training_config(self) -> dict[str, Any]:
        """The job config (the job config keys), as validated when the run started."""
        config = self.config.get("config")
        return dict(config) if isinstance(config, dict) else {}

    @property
    def task(self) -> str:
        """`sft` or `classification`."""
        return str(self.config.get("task") or self.training_config.get("task") or "sft")

    @property
    def uses_peft(self) -> bool:
        """Whether the run trained an adapter."""
        return bool(self.training_config.get("use_peft", True))


def label_of(step: int | None) -> str:
    """`final` or `step-<n>`: how exports and generations name their source."""
    return "final" if step is None else f"step-{step}"


def is_run_dir(path: Path) -> bool:
    """Whether `path` is a run directory (as opposed to a model folder)."""
    run = RunDir(Path(path))
    return run.events.is_file() and (run.final.is_dir() or run.checkpoints.is_dir())


def locate_model_folder(path: Path, checkpoint: int | None = None) -> ModelFolder:
    """The model folder to read: in a run directory, `final/` or `checkpoint-<step>`; else `path` itself."""
    path = Path(path)
    if not is_run_dir(path):
        if checkpoint is not None:
            raise ConfigError(
                [Issue("--checkpoint needs a run directory", field="--checkpoint", file=str(path))],
                title="cannot find the model",
            )
        if not path.is_dir():
            raise ConfigError([Issue("no such folder", file=str(path))], title="cannot find the model")
        return ModelFolder(path, "final")
    run = RunDir(path)
    if checkpoint is None:
        if not run.final.is_dir():
            raise ConfigError(
                [
                    Issue(
                        "the run has no final model yet",
                        file=str(run.final),
                        expected="a finished run, or --checkpoint STEP",
                    )
                ],
                title="cannot find the model",
            )
        return ModelFolder(run.final, "final", run.root)
    steps = dict(run.list_checkpoints())
    if checkpoint not in steps:
        raise ConfigError(
            [
                Issue(
                    "no checkpoint at this step",
                    field="--checkpoint",
                    expected=", ".join(str(step) for step in sorted(steps)) or "a run with checkpoints",
                    found=str(checkpoint),
                )
            ],
            title="cannot find the model",
        )
    return ModelFolder(steps[checkpoint], label_of(checkpoint), run.root)


def read_run_documents(folder: ModelFolder) -> RunDocuments:
    """The run's documents; a model folder without a run falls back on the run config saved beside it."""
    documents = RunDocuments()
    root = folder.run_root
    if root is not None:
        documents.config = _json(root / "config.json") or {}
        documents.env = _json(root / "env.json") or {}
        documents.data_manifest = _json(root / "data_manifest.json") or {}
        documents.results = _json(root / "results.json") or {}
        documents.baseline_eval = _json(root / EVAL_DOCUMENTS[0])
        documents.final_eval = _json(root / EVAL_DOCUMENTS[1])
        documents.diagnoses = _diagnoses(RunDir(root).events)
    if not documents.config:
        documents.config = _json(folder.path / RUN_CONFIG_FILE) or {}
    return documents


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _diagnoses(events: Path) -> list[dict[str, Any]]:
    """The run's diagnosis events (NaN loss, out of memory, slow steps): observed limits for the card."""
    if not events.is_file():
        return []
    from tunedeck.core.events import read_events

    return [event for event in read_events(events) if event.get("type") == "diagnosis"]


def model_folder_from_spec(spec: dict[str, Any]) -> ModelFolder:
    """The model folder a process spec names: `run_dir` (+ `checkpoint`), or `model_dir` (+ `label`, `run_root`)."""
    if spec.get("run_dir"):
        step = spec.get("checkpoint")
        return locate_model_folder(Path(spec["run_dir"]), int(step) if step is not None else None)
    if not spec.get("model_dir"):
        raise ConfigError([Issue("missing", field="run_dir", expected="run_dir or model_dir")], title="invalid spec")
    run_root = spec.get("run_root")
    return ModelFolder(Path(spec["model_dir"]), str(spec.get("label") or "final"), Path(run_root) if run_root else None)
