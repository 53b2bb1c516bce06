"""The licence a base model's own files declare, read without loading the model.

Read in this order, the first that names one wins: the model card's front matter
(`README.md`: `license:`, `license_name:`, `license_link:`), then `config.json`
(`license` / `licence`, which a few models set), then a licence file (`LICENSE`,
`LICENCE`, `COPYING`, with or without `.md` / `.txt`), named by its first line. Nothing
is guessed: a folder that declares none gives a record saying so, and every place that
shows the licence (the model card of an export, the job report) words it with `describe`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

NOT_FOUND = "licence not found in the base model's files"
NOT_RECORDED = "licence not recorded for this run (it was trained before licences were read)"
CARD_FILE = "README.md"
LICENCE_FILES = tuple(f"{stem}{suffix}" for stem in ("LICENSE", "LICENCE", "COPYING") for suffix in ("", ".md", ".txt"))
# Enough to read a model card's front matter or a licence's first line; the rest of the file is never needed.
_READ_LIMIT = 64 * 1024
_VALUE_LIMIT = 300
_CARD_KEYS = ("license", "license_name", "license_link")


@dataclass(frozen=True)
class ModelLicence:
    """What a model folder says about its licence, and which file said it (`source` None: nothing found)."""

    licence: str | None = None
    name: str | None = None  # `license_name`: the name of an `other` licence
    link: str | None = None  # `license_link`: where its text is
    source: str | None = None  # "README.md front matter", "config.json" or the licence file's name

    @property
    def found(self) -> bool:
        """Whether any file named a licence."""
        return self.source is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as recorded in the run's `config.json` (`model.licence`) and in `export.json`."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelLicence:
        """Read a recorded licence; unknown keys and non-text values are ignored."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value else None

        return cls(licence=text("licence"), name=text("name"), link=text("link"), source=text("source"))

    def describe(self) -> str:
        """One line: the licence, its name and link when given, and the file it was read from."""
        if not self.found:
            return NOT_FOUND
        parts = [part for part in (self.licence, self.name) if part]
        said = " / ".join(parts) if parts else "see the link"
        if self.link:
            said += f", {self.link}"
        return f"{said} (from the base model's {self.source})"


def read_model_licence(folder: Path) -> ModelLicence:
    """The licence the files of the model folder `folder` declare; an empty record when none does."""
    folder = Path(folder)
    for reader in (_from_card, _from_config, _from_licence_file):
        found = reader(folder)
        if found is not None:
            return found
    return ModelLicence()


def describe_recorded(recorded: Any) -> str:
    """The line for a licence recorded in a run's documents (`config.json`'s `model.licence`), or that none was."""
    if not isinstance(recorded, Mapping):
        return NOT_RECORDED
    return ModelLicence.from_dict(recorded).describe()


def _from_card(folder: Path) -> ModelLicence | None:
    text = _head(folder / CARD_FILE)
    if text is None:
        return None
    fields = front_matter_fields(text, _CARD_KEYS)
    if not fields:
        return None
    return ModelLicence(
        licence=fields.get("license"),
        name=fields.get("license_name"),
        link=fields.get("license_link"),
        source=f"{CARD_FILE} front matter",
    )


def _from_config(folder: Path) -> ModelLicence | None:
    text = _head(folder / "config.json", limit=None)
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    for key in ("license", "licence"):
        value = config.get(key)
        if isinstance(value, str) and value.strip():
            return ModelLicence(licence=_clean(value), source="config.json")
    return None


def _from_licence_file(folder: Path) -> ModelLicence | None:
    for name in LICENCE_FILES:
        text = _head(folder / name)
        if text is None:
            continue
        first = next((line.strip().lstrip("#").strip() for line in text.splitlines() if line.strip()), "")
        return ModelLicence(licence=_clean(first) or f"see {name}", source=f"{name} file")
    return None


def front_matter_fields(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The top-level `keys` of a Markdown file's YAML front matter, as text (lists joined by `, `).

    Only what a model card's licence fields use is read: plain or quoted scalars and lists
    (`[a, b]` or `- a` lines). Anything else in the front matter is skipped, never evaluated.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    found: dict[str, str] = {}
    current: str | None = None
    items: list[str] = []
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            break
        if current is not None and line.startswith((" ", "\t", "-")) and line.strip().startswith("- "):
            items.append(_scalar(line.strip()[2:]))
            continue
        if current is not None and items:
            found[current] = ", ".join(item for item in items if item)
        current, items = None, []
        if line[:1].isspace() or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key not in keys:
            continue
        value = value.strip()
        if value.startswith("["):
            found[key] = ", ".join(_scalar(item) for item in value.strip("[]").split(",") if _scalar(item))
        elif value and not value.startswith("#"):
            found[key] = _scalar(value)
        else:
            current = key  # a block list may follow
    if current is not None and items:
        found[current] = ", ".join(item for item in items if item)
    return {key: _clean(value) for key, value in found.items() if value and value not in ("null", "~")}


def _scalar(value: str) -> str:
    value = value.strip()
    if value[:1] in ("'", '"'):
        quote = value[0]
        end = value.find(quote, 1)
        return value[1:end] if end > 0 else value[1:]
    return value.split(" #", 1)[0].strip()


def _clean(value: str) -> str:
    """One line of printable text, at most _VALUE_LIMIT characters: a file's text is not trusted to be short."""
    printable = "".join(ch if ch.isprintable() else " " for ch in value)
    return " ".join(printable.split())[:_VALUE_LIMIT]


def _head(path: Path, limit: int | None = _READ_LIMIT) -> str | None:
    if not path.is_file():
        return None
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return handle.read() if limit is None else handle.read(limit)
    except OSError:
        return None
