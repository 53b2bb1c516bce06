"""Where a registered base model's files are on this server, and the facts read from them.

A local model is its registered folder, read only while it is still inside the model roots and
no link in it leads out of it, the rules it was registered under.
A hub model is read from the hub cache on this machine, at the commit a worker pinned,
once a worker on this machine has fetched it; before that its facts are not known here.
Nothing is loaded: only `config.json`, the tokenizer's config and the safetensors headers are read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tunedeck.core.model_facts import ModelFacts, read_model_facts
from tunedeck.core.paths import inside_any, links_leaving
from tunedeck.store.models import BaseModelRecord

NOT_FETCHED = "not known yet: a worker has not fetched this hub model on this server"
NOT_READABLE = "not known: the registered folder cannot be read"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache_dir() -> Path:
    """The hub client's cache, as it places it: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    explicit = os.environ.get("HF_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def model_folder(record: BaseModelRecord, roots: list[Path]) -> Path | None:
    """The folder holding the model's files on this machine, or None when there is none to read."""
    if record.local_path is not None:
        folder = Path(record.local_path).resolve()
        # As at registration: a folder that now links out of itself is not read (its files could be any file).
        readable = inside_any(folder, roots) and folder.is_dir() and not links_leaving(folder)
        return folder if readable else None
    if record.hub_id is None or record.resolved is None or not _COMMIT.match(record.resolved):
        return None
    snapshot = hub_cache_dir() / f"models--{record.hub_id.replace('/', '--')}" / "snapshots" / record.resolved
    return snapshot if snapshot.is_dir() else None


def base_model_facts(record: BaseModelRecord, roots: list[Path]) -> tuple[ModelFacts | None, str]:
    """The model's facts and their one-line summary; None and why not when its files are not readable here."""
    folder = model_folder(record, roots)
    if folder is None:
        return None, NOT_FETCHED if record.hub_id is not None else NOT_READABLE
    facts = read_model_facts(folder)
    return facts, facts.summary() or "not known: the model's files give none of its facts"
