"""What a base model's folder says about it, read from its files without loading the model.

Parameter count from the safetensors headers (each tensor's shape; the weights are never
read), size on disk, architecture from `config.json`, licence (`model_licence`) and whether
the tokenizer carries a chat template (`tokenizer_config.json`'s `chat_template`, or a
`chat_template.jinja` / `chat_template.json` file beside it). Each fact the files do not
give is None, and the page says it is not known; nothing is guessed.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tunedeck.core.model_licence import ModelLicence, read_model_licence

# A safetensors file starts with the length of its JSON header (8 bytes, little-endian). A header
# beyond this size is not read: a real one is a few hundred kilobytes, even for thousands of tensors.
MAX_HEADER_BYTES = 64 * 1024 * 1024
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
_CONFIG_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class ModelFacts:
    """What a model folder's files say; a None fact was not readable from them."""

    parameters: int | None = None
    size_bytes: int | None = None
    architecture: str | None = None
    model_type: str | None = None
    licence: str | None = None
    chat_template: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, for the API and the job form's picker."""
        return asdict(self)

    def summary(self) -> str:
        """One line: parameters, size, architecture, licence and chat template, each known one."""
        parts = [
            f"{format_parameters(self.parameters)} parameters" if self.parameters is not None else None,
            f"{format_bytes(self.size_bytes)} on disk" if self.size_bytes is not None else None,
            self.architecture or self.model_type,
            f"licence {self.licence}" if self.licence else None,
            None if self.chat_template is None else ("chat template" if self.chat_template else "no chat template"),
        ]
        return " · ".join(part for part in parts if part)


def read_model_facts(folder: Path) -> ModelFacts:
    """The facts the files of model folder `folder` give; an empty record when it is not a readable folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return ModelFacts()
    config = _json_object(folder / "config.json")
    architectures = config.get("architectures") if config else None
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    model_type = config.get("model_type") if config else None
    licence = read_model_licence(folder)
    return ModelFacts(
        parameters=parameter_count(folder),
        size_bytes=folder_size(folder),
        architecture=architecture if isinstance(architecture, str) else None,
        model_type=model_type if isinstance(model_type, str) else None,
        licence=_licence_text(licence),
        chat_template=has_chat_template(folder),
    )


def parameter_count(folder: Path) -> int | None:
    """The number of values in the tensors of the folder's `*.safetensors` files; None when one is unreadable."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        header = safetensors_header(path)
        if header is None:
            return None
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, dict):
                continue
            shape = entry.get("shape")
            if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
                return None
            total += math.prod(shape)
    return total


def safetensors_header(path: Path) -> dict[str, Any] | None:
    """The JSON header of a safetensors file (tensor names to dtype, shape, offsets); None when unreadable."""
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                return None
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                return None
            raw = handle.read(length)
    except OSError:
        return None
    try:
        header = json.loads(raw)
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def has_chat_template(folder: Path) -> bool | None:
    """Whether the tokenizer's files carry a chat template; None when the folder has no tokenizer config."""
    if any((folder / name).is_file() for name in CHAT_TEMPLATE_FILES):
        return True
    config = _json_object(folder / "tokenizer_config.json")
    if config is None:
        return None
    return bool(config.get("chat_template"))


def folder_size(folder: Path) -> int | None:
    """The bytes of every file in the folder and its subfolders (a linked file counts as what it points to)."""
    total = 0
    try:
        for path in folder.rglob("*"):
            if path.is_file():
                total += path.stat().st_size
    except OSError:
        return None
    return total


def format_parameters(count: int) -> str:
    """`1234567` -> `1.2M`, `7241732096` -> `7.2B`: the scale people name models by."""
    for threshold, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if count >= threshold:
            return f"{count / threshold:.1f}{suffix}"
    return str(count)


def format_bytes(size: int) -> str:
    """`1536` -> `1.5 KiB`: a size on disk in binary units."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _licence_text(licence: ModelLicence) -> str | None:
    if not licence.found:
        return None
    return " / ".join(part for part in (licence.licence, licence.name) if part) or licence.link


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        if not path.is_file() or path.stat().st_size > _CONFIG_LIMIT:
            return None
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
