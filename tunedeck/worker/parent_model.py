"""The model a chained job starts from (`init_from_job`), fetched for the engine with its pin chain.

The parent job's final model, or its committed checkpoint at `init_from_checkpoint`, is
downloaded as every other input is (each file checked against its manifest), and the pin
chain (`lineage`) is built from what the parent recorded about itself: oldest first, the base
model, then each ancestor job, the parent last:

    [{"name", "source", "revision", "fingerprint", "tokenizer_sha256"},
     {"job_id", "checkpoint": "final" | step, "model_form": "adapter" | "merged", "weights_sha256"}, ...]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.core.errors import StorageError
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.service.jobs.job_models import fetch_job_model, locate_job_model
from tunedeck.storage.base import ArtifactStore, Manifest, file_sha256
from tunedeck.store.access import Actor
from tunedeck.store.store import JobStore

PIN_FILE = "tunedeck_pin.json"  # written beside every final model (the engine's pinning)
ADAPTER_CONFIG = "adapter_config.json"
_BASE_KEYS = ("name", "source", "revision", "fingerprint", "tokenizer_sha256")


@dataclass(frozen=True)
class ParentInputs:
    """The parent's model folder on the worker's disk and the pin chain up to it."""

    model_dir: Path
    lineage: list[dict[str, Any]]


def fetch_parent_model(
    store: JobStore, artifacts: ArtifactStore, owner: Actor, config: dict[str, Any], folder: Path
) -> ParentInputs | None:
    """Download the model the job's config starts from into `folder`; None when it names no `init_from_job`.

    NotFoundError when that job (read as `owner`) or its model is gone; StorageError when a file
    does not match its manifest.
    """
    parent_id = config.get("init_from_job")
    if not parent_id:
        return None
    step = config.get("init_from_checkpoint")
    located = locate_job_model(store, artifacts, owner, str(parent_id), step)
    manifest = artifacts.read_manifest(located.storage_prefix)
    fetched = fetch_job_model(artifacts, located, folder)
    model_dir = Path(fetched["model_dir"])
    parent_entry = {
        "job_id": located.job_id,
        "checkpoint": "final" if step is None else int(step),
        "model_form": "adapter" if (model_dir / ADAPTER_CONFIG).is_file() else "merged",
        "weights_sha256": weights_sha256(model_dir, manifest),
    }
    run_config = _read_json(model_dir / CHECKPOINT_CONFIG) or _read_json(Path(fetched["run_root"]) / "config.json")
    return ParentInputs(model_dir, [*chain_before(model_dir, run_config or {}), parent_entry])


def chain_before(model_dir: Path, run_config: dict[str, Any]) -> list[dict[str, Any]]:
    """The parent's own chain: its recorded lineage, else its base model alone (from its pin or run config)."""
    recorded = run_config.get("lineage")
    if isinstance(recorded, list) and recorded:
        return [dict(entry) for entry in recorded]
    pin = _read_json(model_dir / PIN_FILE)
    if pin is not None and pin.get("model_id"):
        return [{**{key: pin.get(key) for key in _BASE_KEYS[1:]}, "name": pin["model_id"]}]
    model = run_config.get("model")
    if not isinstance(model, dict) or not model.get("name"):
        raise StorageError(f"{model_dir}: the starting model records no base model (no pin, no run config)")
    source = str(model.get("source") or "local")
    # Named as the pin names a base: a local folder by its absolute path, a hub model by its id.
    name = (model.get("path") or model["name"]) if source == "local" else model["name"]
    return [{"name": str(name), "source": source, "revision": model.get("revision"),
             "fingerprint": model.get("fingerprint"), "tokenizer_sha256": None}]  # fmt: skip


def weights_sha256(model_dir: Path, manifest: Manifest | None) -> str:
    """sha256 of the model's weights file; for several (shards), of their sorted `name sha256` lines.

    Read from the manifest the download was checked against (each file's digest), so a
    single file's value is what `sha256sum adapter_model.safetensors` prints.
    """
    if manifest is not None:
        digests = {entry.path: entry.sha256 for entry in manifest.files if _is_weights(entry.path)}
    else:
        digests = {path.name: file_sha256(path) for path in model_dir.iterdir() if _is_weights(path.name)}
    if not digests:
        raise StorageError(f"{model_dir}: the starting model holds no .safetensors weights")
    if len(digests) == 1:
        return next(iter(digests.values()))
    lines = "".join(f"{name} {digest}\n" for name, digest in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _is_weights(path: str) -> bool:
    return "/" not in path and path.endswith(".safetensors")


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None
