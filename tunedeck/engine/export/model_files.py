"""Which files of a saved model folder make an export: the adapter or the full weights, and the tokenizer.

Training folders also hold optimizer and scheduler state, RNG state and trainer state
(pickles among them); none of those belong in an export, and nothing but safetensors
weights is ever copied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tunedeck.core.errors import ModelLoadError
from tunedeck.engine.models.model_source import TOKENIZER_FILES, UNSAFE_WEIGHT_PATTERNS
from tunedeck.engine.models.pinning import ADAPTER_CONFIG_FILE, PIN_FILE, RUN_CONFIG_FILE

ADAPTER_WEIGHTS = "adapter_model.safetensors"
MODEL_CONFIG_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")


def copy_adapter(source: Path, target: Path) -> list[str]:
    """Copy the adapter weights, its config, the tokenizer and the run config; the names copied."""
    if not (source / ADAPTER_WEIGHTS).is_file():
        _refuse_unsafe(source)
        raise ModelLoadError(f"{source}: no {ADAPTER_WEIGHTS} (expected an adapter saved in safetensors)")
    names = [ADAPTER_WEIGHTS, ADAPTER_CONFIG_FILE, *_present(source, (*TOKENIZER_FILES, RUN_CONFIG_FILE, PIN_FILE))]
    return _copy(source, target, names)


def copy_full_model(source: Path, target: Path) -> list[str]:
    """Copy the full model's safetensors weights, its configs, the tokenizer and the run config."""
    weights = sorted(path.name for path in source.glob("*.safetensors"))
    if not weights:
        _refuse_unsafe(source)
        raise ModelLoadError(f"{source}: no *.safetensors weights")
    extras = _present(source, (*MODEL_CONFIG_FILES, *TOKENIZER_FILES, RUN_CONFIG_FILE, PIN_FILE))
    return _copy(source, target, [*weights, *extras])


def copy_tokenizer(source: Path, target: Path) -> list[str]:
    """Copy the tokenizer files (and the run config) saved beside the weights."""
    return _copy(source, target, _present(source, (*TOKENIZER_FILES, RUN_CONFIG_FILE)))


def _present(source: Path, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if (source / name).is_file()]


def _copy(source: Path, target: Path, names: list[str]) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(source / name, target / name)
    return names


def _refuse_unsafe(source: Path) -> None:
    # Optimizer and RNG pickles sit in every checkpoint; only model weights matter here.
    found = {p.name for pattern in UNSAFE_WEIGHT_PATTERNS for p in source.glob(pattern)}
    unsafe = sorted(name for name in found if "model" in name)
    if unsafe:
        raise ModelLoadError(f"{source}: weights are pickles ({', '.join(unsafe)}); only safetensors are exported")
