"""Reading a checkpoint whose weights are sharded (FSDP): consolidated into safetensors first.

A run trained with FSDP saves each checkpoint as shards, one per process
(`torch.distributed.checkpoint`). Exports, generation and the model card read plain
`save_pretrained` folders, so the shards are gathered into one `model.safetensors` (or
`adapter_model.safetensors`) beside copies of the folder's other small files, in a scratch
folder that lives as long as the caller needs it.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tunedeck.engine.distributed.sharded_checkpoint import consolidate_to_safetensors, find_sharded_model
from tunedeck.engine.export.source import ModelFolder

# Training state beside the weights: needed to resume, never part of a model.
_TRAINING_STATE_SUFFIXES = (".pt", ".pth", ".bin", ".distcp")


@contextmanager
def readable(folder: ModelFolder) -> Iterator[ModelFolder]:
    """`folder` itself when its weights are plain files; else a consolidated copy, removed afterwards."""
    sharded = find_sharded_model(folder.path)
    if sharded is None:
        yield folder
        return
    scratch = Path(tempfile.mkdtemp(prefix=".consolidated-", dir=folder.path.parent))
    try:
        out = scratch / folder.path.name
        out.mkdir()
        for entry in folder.path.iterdir():
            if entry.is_file() and not entry.name.endswith(_TRAINING_STATE_SUFFIXES):
                shutil.copy2(entry, out / entry.name)
        consolidate_to_safetensors(sharded, out, adapter=folder.is_adapter)
        yield dataclasses.replace(folder, path=out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
