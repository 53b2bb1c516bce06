"""The checks before an MLX export (also `tunedeck preflight --target mlx`): can mlx-lm open what we would build?

Four checks, in order, each pass, fail or skip with its reason and what to do:

1. `mlx_installed`: mlx and mlx-lm are importable where the export runs.
2. `architecture`: the model type is one mlx-lm implements (`mlx_lm/models/<model_type>.py`,
   after mlx-lm's own renames), so an unsupported model is refused before any merging.
3. `adapter_modules`: for the adapter layout, every module the adapter trains is a linear
   layer inside one of the model's blocks under the same name and shape in mlx-lm's model
   (mlx-lm applies LoRA only there).
4. `unified_memory`: the exported weights, plus room for the runtime, fit the share of a
   Mac's unified memory that its GPU may use (when a size is given).

mlx-lm builds its model skeleton lazily: the shapes are known without allocating weights.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tunedeck.core.errors import ModelLoadError
from tunedeck.core.mlx_export import MLX_QUANTIZE_GROUP, MlxExportOptions
from tunedeck.engine.export.source import ModelFolder
from tunedeck.engine.models.model_source import HubResolver, ModelRef, ResolvedModel
from tunedeck.engine.models.pinning import default_base_ref, resolve_base

Status = Literal["pass", "fail", "skip"]

INSTALL_ADVICE = (
    "install mlx and mlx-lm where the export runs: `make install-mlx` "
    "(or `pip install -c requirements.lock -r requirements-mlx.lock`)"
)
CHECK_TITLES: dict[str, str] = {
    "mlx_installed": "mlx and mlx-lm are installed where the export runs",
    "architecture": "mlx-lm implements the model's architecture",
    "adapter_modules": "the adapter's modules are layers mlx-lm can attach LoRA to",
    "unified_memory": "the exported model fits the Mac's unified memory",
}
# macOS lets the GPU wire about three quarters of unified memory by default (its recommended working set).
GPU_SHARE = 0.75
# Room beyond the weights for activations, the KV cache of a few thousand tokens, and the runtime.
RUNTIME_HEADROOM = 0.20
GIB = 1024**3
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
# `<anything>.<block index>.<module inside the block>`: the block index is the first number in the path.
_IN_BLOCK = re.compile(r"^(?P<prefix>.*?)\.(?P<index>\d+)\.(?P<key>.+)$")


@dataclass
class MlxCheck:
    """The outcome of one check before an MLX export."""

    name: str
    status: Status
    message: str
    advice: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, number: int) -> dict[str, Any]:
        """JSON form, shaped like a preflight check (number, name, title, status, message, advice, figures)."""
        return {
            "number": number,
            "name": self.name,
            "title": CHECK_TITLES[self.name],
            "status": self.status,
            "message": self.message,
            "advice": self.advice,
            "figures": self.figures,
        }


@dataclass
class MlxTargetReport:
    """Every check, in order, and the adapter layout's mlx-lm settings when they could be worked out."""

    checks: list[MlxCheck]
    adapter_layout: AdapterLayout | None = None

    @property
    def ok(self) -> bool:
        """Whether nothing failed."""
        return all(check.status != "fail" for check in self.checks)

    def failures(self) -> list[MlxCheck]:
        """The checks that failed."""
        return [check for check in self.checks if check.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, shaped like the preflight report (`status`, `checks`)."""
        return {
            "target": "mlx",
            "status": "pass" if self.ok else "fail",
            "checks": [check.to_dict(number) for number, check in enumerate(self.checks, start=1)],
        }


@dataclass(frozen=True)
class AdapterLayout:
    """How a PEFT LoRA adapter becomes mlx-lm's: each module's mlx-lm name, and the shared settings."""

    modules: dict[str, str]  # adapter module path (as saved by peft) -> mlx-lm module path
    keys: list[str]  # module names inside a block, as mlx-lm's `lora_parameters.keys` lists them
    num_layers: int  # how many blocks, counted from the last, mlx-lm gives LoRA layers
    rank: int  # the largest rank: smaller ones are padded with zeros, which changes nothing
    scales: dict[str, float]  # adapter module path -> its PEFT scaling (alpha / r, or alpha / sqrt(r))


def mlx_installed() -> bool:
    """Whether mlx and mlx-lm can be imported here (found, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("mlx", "mlx_lm"))


def check_mlx_target(
    model_config: Mapping[str, Any],
    options: MlxExportOptions,
    *,
    adapter_dir: Path | None = None,
    unified_memory_gb: float | None = None,
) -> MlxTargetReport:
    """Run the four checks for exporting the model `model_config` describes (its config.json) with `options`.

    `adapter_dir` is the trained adapter (None for a full fine-tune); `unified_memory_gb` the
    Mac's memory (None: that check is skipped). Later checks skip once one fails.
    """
    checks: list[MlxCheck] = []
    if not mlx_installed():
        checks.append(MlxCheck("mlx_installed", "fail", "mlx-lm is not installed on this machine",
                               [INSTALL_ADVICE]))
        blocked = "mlx-lm is needed for this check"
        checks += [MlxCheck(name, "skip", blocked) for name in ("architecture", "adapter_modules", "unified_memory")]
        return MlxTargetReport(checks)
    import mlx_lm

    checks.append(MlxCheck("mlx_installed", "pass", f"mlx-lm {mlx_lm.__version__}"))
    model_type = str(model_config.get("model_type") or "")
    skeleton, refusal = _skeleton(model_config)
    if skeleton is None:
        checks.append(MlxCheck("architecture", "fail", refusal, [
            "export this model for transformers instead (the adapter or merged formats)",
            "or use an mlx-lm release that implements it (its mlx_lm/models/ folder lists what it does)",
        ], {"model_type": model_type}))
        checks += [MlxCheck(name, "skip", "the architecture is not supported")
                   for name in ("adapter_modules", "unified_memory")]
        return MlxTargetReport(checks)
    checks.append(MlxCheck("architecture", "pass", f"mlx-lm implements {model_type!r}", figures={
        "model_type": model_type}))
    layout = None
    if options.contents != "adapter":
        checks.append(MlxCheck("adapter_modules", "skip", "merged export: the adapter is folded into the weights"))
    elif adapter_dir is None:
        checks.append(MlxCheck("adapter_modules", "fail", "this model was trained in full: it has no adapter", [
            "choose the merged layout (mlx_contents: merged)"]))
    else:
        layout, check = _adapter_check(skeleton, adapter_dir)
        checks.append(check)
    checks.append(_memory_check(skeleton, options, unified_memory_gb))
    return MlxTargetReport(checks, layout)


def check_model_folder(
    folder: ModelFolder,
    options: MlxExportOptions,
    *,
    base: ModelRef | ResolvedModel | None = None,
    unified_memory_gb: float | None = None,
    hub: HubResolver | None = None,
) -> tuple[MlxTargetReport, ResolvedModel | None]:
    """The checks for exporting a saved model or adapter (`tunedeck preflight --target mlx`), and its base.

    An adapter's architecture is its base's: `base`, or the one the adapter is pinned to.
    """
    resolved = None
    if folder.is_adapter:
        reference = base or default_base_ref(folder.path)
        if reference is None:
            raise ModelLoadError(f"{folder.path}: the adapter records no base model; name its base")
        resolved = resolve_base(reference, hub)
    report = check_mlx_target(
        model_config(resolved.path if resolved is not None else folder.path),
        options,
        adapter_dir=folder.path if folder.is_adapter else None,
        unified_memory_gb=unified_memory_gb,
    )
    return report, resolved


def model_config(folder: Path) -> dict[str, Any]:
    """A model folder's config.json (the architecture mlx-lm must implement); ModelLoadError when unreadable."""
    try:
        document = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{folder}: no readable config.json ({error})") from None
    if not isinstance(document, dict):
        raise ModelLoadError(f"{folder}/config.json: expected a JSON object")
    return document


def _skeleton(model_config: Mapping[str, Any]) -> tuple[Any, str]:
    """mlx-lm's model for this config, built lazily (no weights allocated); (None, why) when it has none."""
    from mlx_lm.utils import _get_classes  # mlx-lm's own lookup, with its renames of model types

    model_type = model_config.get("model_type")
    if not model_type:
        return None, "the model's config.json names no model_type"
    try:
        model_class, args_class = _get_classes(dict(model_config))
    except ValueError:
        return None, f"mlx-lm does not implement the model type {model_type!r}"
    try:
        return model_class(args_class.from_dict(dict(model_config))), ""
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        return None, f"mlx-lm's {model_type!r} model does not accept this config ({error})"


def _adapter_check(skeleton: Any, adapter_dir: Path) -> tuple[AdapterLayout | None, MlxCheck]:
    try:
        layout = adapter_layout(skeleton, adapter_dir)
    except AdapterMappingError as error:
        return None, MlxCheck("adapter_modules", "fail", str(error), [
            "export the merged MLX model instead (mlx_contents: merged): merging needs no layer mapping",
        ])
    return layout, MlxCheck(
        "adapter_modules", "pass",
        f"{len(layout.modules)} adapted modules map onto mlx-lm's layers ({', '.join(layout.keys)})",
        figures={"modules": len(layout.modules), "keys": layout.keys, "rank": layout.rank},
    )


class AdapterMappingError(ValueError):
    """The adapter cannot be expressed in mlx-lm's adapter format; the message says which module and why."""


def adapter_layout(skeleton: Any, adapter_dir: Path) -> AdapterLayout:
    """Map a saved PEFT LoRA adapter onto mlx-lm's model `skeleton`; AdapterMappingError when it does not fit."""
    import mlx.nn as nn
    from mlx.utils import tree_flatten
    from safetensors import safe_open

    config = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    kind = str(config.get("peft_type") or "")
    if kind != "LORA":
        raise AdapterMappingError(f"the adapter is {kind or 'of an unknown kind'}; mlx-lm's adapters are LoRA")
    if config.get("use_dora"):
        raise AdapterMappingError("the adapter is DoRA; this export writes LoRA adapters only")
    if config.get("modules_to_save"):
        raise AdapterMappingError(
            f"the adapter also trains whole modules ({', '.join(config['modules_to_save'])}); "
            "mlx-lm's adapter format holds LoRA layers only"
        )
    if config.get("bias", "none") != "none":
        raise AdapterMappingError("the adapter trains biases; mlx-lm's adapter format holds LoRA layers only")
    with safe_open(str(adapter_dir / "adapter_model.safetensors"), framework="numpy") as handle:
        shapes = {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118
    ranks: dict[str, int] = {}
    for key, shape in shapes.items():
        module, _, leaf = key.removeprefix("base_model.model.").rpartition(".lora_")
        if leaf not in ("A.weight", "B.weight"):
            raise AdapterMappingError(f"the adapter holds {key!r}, which is not a LoRA A or B matrix of a linear layer")
        if leaf == "A.weight":
            ranks[module] = shape[0]
    # Where mlx-lm's blocks sit: the path of `model.layers[0]` less its index.
    blocks = list(skeleton.layers)
    named = dict(skeleton.named_modules())
    block_path = next((name for name, module in named.items() if module is blocks[0]), None)
    if block_path is None:
        raise AdapterMappingError("mlx-lm's model exposes no blocks to attach LoRA layers to")
    block_prefix = block_path.rpartition(".")[0]
    parameters = dict(tree_flatten(skeleton.parameters()))
    modules: dict[str, str] = {}
    keys: set[str] = set()
    first_block = len(blocks)
    for module in sorted(ranks):
        match = _IN_BLOCK.match(module)
        if match is None:
            raise AdapterMappingError(
                f"the adapted module {module!r} is outside the model's blocks; mlx-lm attaches LoRA inside them only"
            )
        index, key = int(match["index"]), match["key"]
        target = f"{block_prefix}.{index}.{key}"
        weight = parameters.get(f"{target}.weight")
        layer = named.get(target)
        # What mlx-lm's `linear_to_lora_layers` converts: linear layers, or layers that say how (`to_lora`).
        if weight is None or not (isinstance(layer, (nn.Linear, nn.QuantizedLinear)) or hasattr(layer, "to_lora")):
            raise AdapterMappingError(
                f"the adapted module {module!r} has no linear counterpart {target!r} in mlx-lm's model"
            )
        out_dims, in_dims = weight.shape
        a_shape, b_shape = shapes[f"base_model.model.{module}.lora_A.weight"], shapes[
            f"base_model.model.{module}.lora_B.weight"]
        if a_shape[1] != in_dims or b_shape[0] != out_dims:
            raise AdapterMappingError(
                f"the adapted module {module!r} is {a_shape[1]} → {b_shape[0]} but mlx-lm's {target!r} "
                f"is {in_dims} → {out_dims}"
            )
        modules[module] = target
        keys.add(key)
        first_block = min(first_block, index)
    if not modules:
        raise AdapterMappingError("the adapter holds no LoRA matrices")
    return AdapterLayout(
        modules=modules,
        keys=sorted(keys),
        num_layers=len(blocks) - first_block,
        rank=max(ranks.values()),
        scales={module: _scaling(config, module, rank) for module, rank in ranks.items()},
    )


def _scaling(config: Mapping[str, Any], module: str, rank: int) -> float:
    """PEFT's scaling of one module: its alpha over its rank (over the rank's square root with rsLoRA)."""
    alpha = float(config.get("lora_alpha") or rank)
    for pattern, value in (config.get("alpha_pattern") or {}).items():
        if re.search(rf"(^|\.){pattern}$", module):  # PEFT matches a pattern at the end of the module's name
            alpha = float(value)
    return alpha / (rank**0.5 if config.get("use_rslora") else rank)


def _memory_check(skeleton: Any, options: MlxExportOptions, unified_memory_gb: float | None) -> MlxCheck:
    weights = exported_weight_bytes(skeleton, options)
    needed = weights * (1 + RUNTIME_HEADROOM)
    figures: dict[str, Any] = {"weight_bytes": weights, "needed_bytes": int(needed)}
    if unified_memory_gb is None:
        return MlxCheck("unified_memory", "skip",
                        f"weights {weights / GIB:.2f} GiB; give the Mac's unified memory to check the fit",
                        ["pass --unified-memory-gb (the memory the Mac has, e.g. 16)"], figures)
    usable = unified_memory_gb * GIB * GPU_SHARE
    figures.update(unified_memory_gb=unified_memory_gb, usable_bytes=int(usable))
    summary = (f"weights {weights / GIB:.2f} GiB + {RUNTIME_HEADROOM:.0%} for the runtime = {needed / GIB:.2f} GiB; "
               f"the GPU may use about {usable / GIB:.1f} GiB of {unified_memory_gb:g} GB")
    if needed <= usable:
        return MlxCheck("unified_memory", "pass", summary, figures=figures)
    advice = []
    if options.quantize_bits != 4:
        smaller = exported_weight_bytes(skeleton, MlxExportOptions(dtype=options.dtype, quantize_bits=4))
        advice.append(f"quantise to 4 bits (quantize_bits: 4): weights of about {smaller / GIB:.2f} GiB")
    advice.append(f"use a Mac with at least {needed / GPU_SHARE / GIB:.0f} GB of unified memory")
    return MlxCheck("unified_memory", "fail", f"does not fit: {summary}", advice, figures)


def exported_weight_bytes(skeleton: Any, options: MlxExportOptions) -> int:
    """Bytes of the exported weights: each parameter in the chosen dtype, or quantised as mlx-lm quantises it.

    mlx-lm quantises the layers that can be (linear and embedding layers) whose input size is a
    multiple of the group; each group of weights keeps a scale and a bias in the model's dtype.
    """
    import mlx.nn as nn
    from mlx.utils import tree_flatten

    element = _DTYPE_BYTES[options.dtype]
    total = 0.0
    leaves: dict[str, Any] = dict(
        tree_flatten(skeleton.leaf_modules(), is_leaf=lambda module: isinstance(module, nn.Module))
    )
    for module in leaves.values():
        sizes = {name: value.size for name, value in dict(tree_flatten(module.parameters())).items()}
        weight = getattr(module, "weight", None)
        quantised = (options.quantize_bits is not None and hasattr(module, "to_quantized") and weight is not None
                     and weight.shape[-1] % MLX_QUANTIZE_GROUP == 0)
        for name, size in sizes.items():
            if quantised and name == "weight" and options.quantize_bits is not None:
                total += size * options.quantize_bits / 8 + size / MLX_QUANTIZE_GROUP * 2 * element
            else:
                total += size * element
    return int(total)
