"""Pinning a base model: fingerprints of local folders, commit hashes of hub ids, refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunedeck.core.errors import ModelLoadError
from tunedeck.engine.models.model_source import ModelRef, fingerprint_model_dir, resolve_model


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_local_folder_is_fingerprinted_and_a_changed_weight_changes_it(tiny_llama_dir: Path, tmp_path: Path) -> None:
    resolved = resolve_model(ModelRef(str(tiny_llama_dir)))
    assert resolved.source == "local"
    assert resolved.fingerprint == fingerprint_model_dir(tiny_llama_dir)
    copy = _copy(tiny_llama_dir, tmp_path / "copy")
    assert fingerprint_model_dir(copy) == resolved.fingerprint  # content, not location
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert fingerprint_model_dir(copy) != resolved.fingerprint


def test_folder_without_weights_is_refused(tiny_llama_dir: Path, tmp_path: Path) -> None:
    copy = _copy(tiny_llama_dir, tmp_path / "no-weights")
    (copy / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="no weights"):
        resolve_model(ModelRef(str(copy)))


def test_pickle_weights_are_refused(tiny_llama_dir: Path, tmp_path: Path) -> None:
    copy = _copy(tiny_llama_dir, tmp_path / "pickled")
    (copy / "model.safetensors").rename(copy / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="only safetensors"):
        resolve_model(ModelRef(str(copy)))


class FakeHub:
    """Resolves every revision to a fixed commit and a local folder, recording what was asked."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.asked: list[tuple[str, str | None]] = []

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        self.asked.append((repo_id, revision))
        return "0123456789abcdef0123456789abcdef01234567", self.folder


def test_hub_id_is_pinned_to_the_resolved_commit(tiny_llama_dir: Path) -> None:
    hub = FakeHub(tiny_llama_dir)
    resolved = resolve_model(ModelRef("example-org/tiny-llama", "main"), hub)
    assert hub.asked == [("example-org/tiny-llama", "main")]
    assert resolved.source == "hub"
    assert resolved.revision == "0123456789abcdef0123456789abcdef01234567"
    assert resolved.to_dict()["name"] == "example-org/tiny-llama"


def test_revision_on_a_local_folder_and_missing_paths_are_refused(tiny_llama_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="hub models only"):
        resolve_model(ModelRef(str(tiny_llama_dir), "v1"))
    with pytest.raises(ModelLoadError, match="no such model folder"):
        resolve_model(ModelRef(str(tmp_path / "missing" / "model")))
