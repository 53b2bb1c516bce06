"""The reference of every setting (name, variable, type, default, description), generated from the settings.

The documentation includes it as it is; a setting added to `Settings` appears in it with nothing
else to write.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from tunedeck.core.settings import ProcessSettings, Settings, setting_variable

HEADER = ("Setting", "Variable", "Type", "Default", "Description")


@dataclass(frozen=True)
class SettingEntry:
    """One row of the reference."""

    name: str
    variable: str
    type: str
    default: str
    description: str


def setting_entries(settings: type[BaseSettings] = Settings) -> list[SettingEntry]:
    """The rows of `settings`, in the order they are declared."""
    return [
        SettingEntry(
            name=name,
            variable=setting_variable(name),
            type=_type_name(info.annotation),
            default=_default(info),
            description=(info.description or "").strip(),
        )
        for name, info in settings.model_fields.items()
    ]


def settings_reference() -> str:
    """The reference as Markdown: one table of the settings, one of what single processes read where they start."""
    return "\n".join([
        "# Settings",
        "",
        "Every setting is an environment variable read once by the server, the worker and the command line.",
        "",
        *_table(setting_entries(Settings)),
        "",
        "## Read by a process where it starts",
        "",
        "These reach a process through the environment it was started with.",
        "",
        *_table(setting_entries(ProcessSettings)),
        "",
    ])  # fmt: skip


def _table(entries: list[SettingEntry]) -> list[str]:
    rows = [HEADER, tuple("---" for _ in HEADER)]
    rows += [(f"`{e.name}`", f"`{e.variable}`", e.type, e.default, e.description) for e in entries]
    return ["| " + " | ".join(_cell(text) for text in row) + " |" for row in rows]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type_name(annotation: Any) -> str:
    """`int`, `str or unset`, `offline or online`: the type as a reader needs it."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        parts = [_type_name(part) for part in typing.get_args(annotation) if part is not type(None)]
        unset = type(None) in typing.get_args(annotation)
        return " or ".join(parts) + (" or unset" if unset else "")
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(str(value) for value in typing.get_args(annotation))
    if annotation is Path:
        return "path"
    if getattr(annotation, "__name__", None) == "SecretStr":
        return "secret"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "unset"
    return f"`{info.default}`"
