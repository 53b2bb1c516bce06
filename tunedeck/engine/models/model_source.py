"""Where a base model comes from, pinned: a hub id resolved to a commit, or a local folder's fingerprint.

A run records exactly which weights it started from, so an export can name its base and a
resume can refuse different weights. Hub access sits behind `HubResolver` so tests (and
offline installs) inject a local resolution; nothing here downloads unless a hub id is given.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from tunedeck.core.errors import ModelLoadError
from tunedeck.core.model_code import foreign_code_references
from tunedeck.core.model_licence import LICENCE_FILES
from tunedeck.core.paths import links_leaving

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
WEIGHT_PATTERNS = ("*.safetensors", "model.safetensors.index.json")
UNSAFE_WEIGHT_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.ckpt")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)


@dataclass(frozen=True)
class ModelRef:
    """A base model as the user named it: a local folder or a hub id with an optional revision."""

    name: str
    revision: str | None = None


@dataclass(frozen=True)
class ResolvedModel:
    """A base model pinned to exact files on disk."""

    path: Path
    source: Literal["local", "hub"]
    name: str
    revision: str | None  # the commit hash for hub models
    fingerprint: str | None  # sha256 over weight, config and tokenizer files for local models

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for config.json and results.json."""
        data = asdict(self)
        data["path"] = str(self.path)
        return data


class HubResolver(Protocol):
    """Turns a hub id and revision into a commit hash and a local snapshot folder."""

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        """The commit hash `revision` points at, and a folder holding that commit's files."""
        ...


class HuggingFaceHubResolver:
    """Resolves through the huggingface_hub client (network, or its cache when offline)."""

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        """Pin `revision` (default: the main branch) to a commit, then fetch that commit's safe files."""
        from huggingface_hub import HfApi, snapshot_download

        try:
            commit = HfApi().model_info(repo_id, revision=revision).sha
            if not commit:
                raise ModelLoadError(f"{repo_id}: the hub returned no commit for revision {revision or 'main'}")
            folder = snapshot_download(
                repo_id,
                revision=commit,
                # The model card and licence files too: the licence is read from them.
                allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "README.md", *LICENCE_FILES],
            )
        except ModelLoadError:
            raise
        except Exception as error:  # the client raises many kinds; all mean "cannot resolve"
            raise ModelLoadError(f"{repo_id}@{revision or 'main'}: cannot resolve on the hub: {error}") from error
        return commit, Path(folder)


def resolve_model(ref: ModelRef, hub: HubResolver | None = None) -> ResolvedModel:
    """Pin `ref`: a local folder gets a fingerprint; a hub id gets its revision's commit hash."""
    local = Path(ref.name).expanduser()
    if local.exists():
        if ref.revision is not None:
            raise ModelLoadError(f"{local}: --revision applies to hub models only, not to a local folder")
        check_model_dir(local)
        check_no_link_leaves(local)
        check_no_foreign_code(local)
        return ResolvedModel(local.resolve(), "local", str(local), None, fingerprint_model_dir(local))
    if not _HUB_ID.match(ref.name) or ref.name.startswith((".", "~")):
        raise ModelLoadError(f"{ref.name}: no such model folder (expected a folder or a hub id like owner/name)")
    commit, folder = (hub or HuggingFaceHubResolver()).resolve(ref.name, ref.revision)
    check_model_dir(folder)
    check_no_foreign_code(folder)
    return ResolvedModel(folder, "hub", ref.name, commit, None)


def check_model_dir(path: Path) -> None:
    """Raise ModelLoadError unless `path` is a folder with a config and safetensors weights."""
    if not path.is_dir():
        raise ModelLoadError(f"{path}: not a folder (expected a model folder with config.json and *.safetensors)")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path}: no config.json (expected a model folder saved with save_pretrained)")
    if any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        return
    unsafe = sorted(p.name for pattern in UNSAFE_WEIGHT_PATTERNS for p in path.glob(pattern))
    if unsafe:
        raise ModelLoadError(
            f"{path}: weights are in pickle format ({', '.join(unsafe)}); only safetensors are loaded "
            "(convert the model to *.safetensors)"
        )
    raise ModelLoadError(f"{path}: no weights (expected model.safetensors or a sharded *.safetensors index)")


def check_no_foreign_code(path: Path) -> None:
    """Raise ModelLoadError if the model's auto_map points at code in another hub repository."""
    foreign = foreign_code_references(path)
    if foreign:
        raise ModelLoadError(
            f"{path}: auto_map refers to code in another repository ({'; '.join(foreign[:3])}); "
            "tunedeck never fetches or runs it"
        )


def check_no_link_leaves(path: Path) -> None:
    """Raise ModelLoadError if a file of the local model folder `path` is a link to something outside it.

    A linked tokenizer or chat template would be read, saved with the trained model and
    offered for download: a way to read any file the worker can. (Hub snapshots link into
    the hub cache by design and are not checked here.)
    """
    leaving = links_leaving(path)
    if leaving:
        raise ModelLoadError(
            f"{path}: links to files outside the model folder ({', '.join(leaving[:5])}); copy them in instead"
        )


def fingerprint_model_dir(path: Path) -> str:
    """sha256 over the names and bytes of the weight, config and tokenizer files, in name order."""
    files = {p for pattern in WEIGHT_PATTERNS for p in path.glob(pattern)}
    files |= {path / name for name in (*TOKENIZER_FILES, "config.json") if (path / name).is_file()}
    digest = hashlib.sha256()
    for file in sorted(files):
        digest.update(file.name.encode() + b"\0")
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
