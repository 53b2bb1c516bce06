"""The pin chain a chained job's worker builds from what its parent recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import Manifest, ManifestEntry
from tunedeck.worker.parent_model import chain_before, weights_sha256

BASE = {
    "name": "/models/base",
    "source": "local",
    "revision": None,
    "fingerprint": "f" * 64,
    "tokenizer_sha256": "t" * 64,
}


def test_a_parent_that_was_chained_itself_passes_its_chain_on(tmp_path: Path) -> None:
    grandparent = {"job_id": "job_a", "checkpoint": 4, "model_form": "adapter", "weights_sha256": "a" * 64}
    assert chain_before(tmp_path, {"lineage": [BASE, grandparent]}) == [BASE, grandparent]


def test_a_parent_from_its_base_gives_the_base_its_pin_names(tmp_path: Path) -> None:
    pin = {"format": "tunedeck.pin/1", "model_id": "/models/base", "source": "local", "revision": None,
           "fingerprint": "f" * 64, "tokenizer_sha256": "t" * 64}  # fmt: skip
    (tmp_path / "tunedeck_pin.json").write_text(json.dumps(pin))
    assert chain_before(tmp_path, {}) == [BASE]


def test_a_checkpoint_without_a_pin_names_its_base_from_the_run_config(tmp_path: Path) -> None:
    model = {"name": "org/base", "source": "hub", "revision": "c" * 40, "fingerprint": None, "path": "/cache/x"}
    assert chain_before(tmp_path, {"model": model}) == [
        {"name": "org/base", "source": "hub", "revision": "c" * 40, "fingerprint": None, "tokenizer_sha256": None}
    ]
    with pytest.raises(StorageError, match="records no base model"):
        chain_before(tmp_path, {})


def test_weights_hash_is_the_files_own_or_one_over_the_shards(tmp_path: Path) -> None:
    one = Manifest(
        files=(ManifestEntry("adapter_model.safetensors", 3, "1" * 64), ManifestEntry("a.json", 2, "2" * 64))
    )
    assert weights_sha256(tmp_path, one) == "1" * 64
    shards = Manifest(
        files=(ManifestEntry("model-2.safetensors", 3, "4" * 64), ManifestEntry("model-1.safetensors", 3, "3" * 64))
    )
    lines = f"model-1.safetensors {'3' * 64}\nmodel-2.safetensors {'4' * 64}\n"
    assert weights_sha256(tmp_path, shards) == hashlib.sha256(lines.encode()).hexdigest()
    with pytest.raises(StorageError, match=r"no \.safetensors weights"):
        weights_sha256(tmp_path, Manifest(files=()))
