"""Code a model folder asks to run: its config's `auto_map`, and references to code in other repositories.

`auto_map` entries name classes in the folder's own Python files ("modeling_x.MyModel"),
or, as "owner/repo--modeling_x.MyModel", in another hub repository that transformers
would fetch and run. The first kind runs only for base models an admin allowed; the
second is never followed, since no one reviewed that code on this server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CONFIG_FILES = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json")
FOREIGN_MARK = "--"


def _auto_map_entries(document: Any) -> Iterator[tuple[str, str]]:
    auto_map = document.get("auto_map") if isinstance(document, dict) else None
    if not isinstance(auto_map, dict):
        return
    for key, value in auto_map.items():
        for entry in value if isinstance(value, list) else [value]:
            if isinstance(entry, str):
                yield str(key), entry


def foreign_code_references(folder: Path) -> list[str]:
    """`file: key -> entry` for each auto_map entry of the folder's configs that points into another repository."""
    found = []
    for name in CONFIG_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # an unreadable config is refused by whoever loads it, with its own message
        found += [f"{name}: {key} -> {entry}" for key, entry in _auto_map_entries(document) if FOREIGN_MARK in entry]
    return found
