"""An MLX export's model files: what `mlx_lm.load` opens on Apple silicon.

Two layouts. `merged`: the adapter folded into its base (as the merged export does), then
converted by mlx-lm's own converter to float16, bfloat16 or float32, or quantised to 4 or 8
bits. `adapter`: the base converted the same way, with the adapter beside it in `adapter/`,
in mlx-lm's adapter format (`adapters.safetensors` and `adapter_config.json`), so it loads
with `mlx_lm.load(folder, adapter_path=folder/adapter)`.

PEFT keeps LoRA's matrices as A (rank × in) and B (out × rank) and adds `scaling · B·A·x`;
mlx-lm keeps `lora_a` (in × rank) and `lora_b` (rank × out) and adds `scale · x·lora_a·lora_b`,
so they are transposed. mlx-lm has one rank and one scale for the whole adapter: a smaller
rank is padded with zeros (which adds nothing), and per-module scalings that differ are
folded into `lora_b` under a scale of 1.

Recent transformers releases save the rotary embedding's settings under `rope_parameters`;
mlx-lm's Llama and Qwen2 models read the older `rope_theta` and `rope_scaling` keys and would
otherwise fall back to their own defaults (Qwen2's base of 1e6 where the model used 1e4), so
the exported config.json carries both spellings.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ModelLoadError
from tunedeck.core.mlx_export import MLX_QUANTIZE_GROUP, MlxExportOptions
from tunedeck.engine.export.merge import write_merged
from tunedeck.engine.export.mlx_target import AdapterLayout
from tunedeck.engine.export.model_files import ADAPTER_WEIGHTS, copy_tokenizer
from tunedeck.engine.export.source import ModelFolder, RunDocuments
from tunedeck.engine.models.model_source import ResolvedModel
from tunedeck.engine.models.pinning import check_base, read_pin

MLX_ADAPTER_FOLDER = "adapter"
MLX_ADAPTER_WEIGHTS = "adapters.safetensors"
MLX_ADAPTER_CONFIG = "adapter_config.json"
# mlx-lm writes a card of its own; the export's card (README.md) replaces it.
_MLX_CARD = "README.md"


def write_mlx(
    folder: ModelFolder,
    documents: RunDocuments,
    base: ResolvedModel | None,
    target: Path,
    options: MlxExportOptions,
    *,
    layout: AdapterLayout | None,
    max_shard_size: str,
    allow_base_mismatch: bool = False,
) -> list[str]:
    """Write the MLX model (and, for the adapter layout, `adapter/`) into `target`; the warnings found."""
    work = Path(tempfile.mkdtemp(prefix=".mlx-", dir=target.parent))
    try:
        if options.contents == "adapter":
            if base is None or layout is None or not folder.is_adapter:
                raise ModelLoadError(f"{folder.path}: the adapter layout needs an adapter and its base model")
            trust = bool(documents.training_config.get("trust_remote_code", False))
            warnings = check_base(read_pin(folder.path), base, what=f"the adapter in {folder.path}",
                                  allow_mismatch=allow_base_mismatch, trust_remote_code=trust)
            _convert(base.path, work / "mlx", options)
            copy_tokenizer(folder.path, work / "mlx")  # the tokenizer the run trained with (its chat template)
            write_mlx_adapter(folder.path, layout, work / "mlx" / MLX_ADAPTER_FOLDER,
                              dropout=_dropout(folder.path))
        else:
            _, warnings = write_merged(folder, documents, base, work / "merged", max_shard_size=max_shard_size,
                                       allow_base_mismatch=allow_base_mismatch)
            _convert(work / "merged", work / "mlx", options)
        (work / "mlx" / _MLX_CARD).unlink(missing_ok=True)
        _spell_rope_for_mlx(work / "mlx" / "config.json")
        target.mkdir(parents=True, exist_ok=True)
        for item in (work / "mlx").iterdir():
            shutil.move(str(item), target / item.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return warnings


def _convert(source: Path, out: Path, options: MlxExportOptions) -> None:
    """mlx-lm's converter: `source` (a transformers folder) into the new folder `out`."""
    from mlx_lm import convert

    # The converter reports on stdout, which carries the engine process's one-line answer: sent to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        convert(
            str(source),
            str(out),
            quantize=options.quantize_bits is not None,
            q_bits=options.quantize_bits,
            q_group_size=MLX_QUANTIZE_GROUP,
            dtype=options.dtype,
        )


def _spell_rope_for_mlx(config_file: Path) -> None:
    """Add `rope_theta` (and `rope_scaling`, for a scaled rope) from `rope_parameters` where they are missing."""
    config = json.loads(config_file.read_text(encoding="utf-8"))
    rope = config.get("rope_parameters")
    if not isinstance(rope, dict) or "rope_theta" not in rope:
        return  # the older keys already, or a per-layer-type rope that mlx-lm's models read themselves
    config.setdefault("rope_theta", rope["rope_theta"])
    kind = rope.get("rope_type", "default")
    if kind != "default" and not config.get("rope_scaling"):
        config["rope_scaling"] = {**{k: v for k, v in rope.items() if k != "rope_theta"}, "type": kind}
    config_file.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")


def write_mlx_adapter(adapter_dir: Path, layout: AdapterLayout, out: Path, *, dropout: float = 0.0) -> list[str]:
    """The PEFT adapter in `adapter_dir` written in mlx-lm's adapter format into `out`; the names written."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    scales = set(layout.scales.values())
    shared = scales.pop() if len(scales) == 1 else 1.0
    tensors: dict[str, Any] = {}
    with safe_open(str(adapter_dir / ADAPTER_WEIGHTS), framework="pt") as handle:
        for module, target in layout.modules.items():
            lora_a = handle.get_tensor(f"base_model.model.{module}.lora_A.weight").float().numpy().T
            lora_b = handle.get_tensor(f"base_model.model.{module}.lora_B.weight").float().numpy().T
            lora_b = lora_b * (layout.scales[module] / shared)
            padding = layout.rank - lora_a.shape[1]
            tensors[f"{target}.lora_a"] = np.ascontiguousarray(np.pad(lora_a, ((0, 0), (0, padding))))
            tensors[f"{target}.lora_b"] = np.ascontiguousarray(np.pad(lora_b, ((0, padding), (0, 0))))
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / MLX_ADAPTER_WEIGHTS))
    config = {
        "fine_tune_type": "lora",
        "num_layers": layout.num_layers,
        "lora_parameters": {"rank": layout.rank, "scale": shared, "dropout": dropout, "keys": layout.keys},
    }
    (out / MLX_ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return [MLX_ADAPTER_WEIGHTS, MLX_ADAPTER_CONFIG]


def _dropout(adapter_dir: Path) -> float:
    """The adapter's LoRA dropout (mlx-lm uses it only if training continues)."""
    config = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    return float(config.get("lora_dropout") or 0.0)
