"""Starting a run from another job's model (`init_from_job`): continue its adapter, merge it, or load its weights.

The worker downloads the parent job's model folder (its final model or one checkpoint) and
passes it as `RunSpec.init_from`; the base model is loaded first, then:

- the parent saved an adapter and this run trains one: that adapter is trained on, with the
  parent's rank, alpha and target modules (a different request is reported, not applied).
  Preference tasks that compare with a reference also load it a second time, frozen, under
  the adapter name `ref` (the preference trainers' reference model); only the trained adapter
  is ever saved;
- the parent saved an adapter and this run trains every weight: the adapter is merged into
  the base first;
- the parent saved full weights: they are the starting model (same architecture as the base,
  else refused), then the usual path (a new adapter, or every weight).

`lineage` (in the run spec and config.json) is the pin chain so far, oldest first: the base
model (`name`, `revision`, `source`, `fingerprint`, `tokenizer_sha256`), then one entry per
ancestor job: `{"job_id", "checkpoint": "final" | step, "model_form": "adapter" | "merged",
"weights_sha256"}`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tunedeck.config.preference import REFERENCE_TASKS
from tunedeck.config.training import TrainingConfig, gradient_checkpointing_on
from tunedeck.core.errors import ConfigError, Issue, ModelLoadError
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.engine.models.model_source import WEIGHT_PATTERNS, fingerprint_model_dir

REFERENCE_ADAPTER = "ref"
"""The adapter name the preference trainers take as the frozen reference model."""
TRAINED_ADAPTER = "default"
ADAPTER_CONFIG_FILE = "adapter_config.json"
# The architecture keys that must agree for a parent's weights to stand in for the base.
_SHAPE_KEYS = ("model_type", "architectures", "hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads")

ParentForm = Literal["adapter", "merged"]


@dataclass(frozen=True)
class ParentModel:
    """The downloaded model of the parent job, and what it holds."""

    folder: Path
    form: ParentForm
    adapter_config: dict[str, Any] | None

    @property
    def weights_folder(self) -> Path | None:
        """The folder to load weights from instead of the base: the parent's full weights, if it has them."""
        return self.folder if self.form == "merged" else None


@dataclass(frozen=True)
class StartingPoint:
    """How the run started from its parent, for config.json and the pin (`how`: adapter, merged_adapter, weights)."""

    how: str
    parent_form: ParentForm
    parent_weights_fingerprint: str | None = None  # the base an adapter trained on parent weights is pinned to
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (config.json's `init_from`)."""
        return {
            "how": self.how,
            "parent_form": self.parent_form,
            "parent_weights_fingerprint": self.parent_weights_fingerprint,
            "notes": list(self.notes),
        }


def require_starting_model(config: TrainingConfig, init_from: Path | None) -> None:
    """Refuse a config naming `init_from_job` when the run was not given that job's model (never ignored)."""
    if config.init_from_job is not None and init_from is None:
        raise ConfigError(
            [
                Issue(
                    f"names job {config.init_from_job!r}, but this run was not given that job's model",
                    field="init_from_job",
                    expected="a job run by the service (its worker fetches the model), or, from the command line, "
                    "the model folder passed with --init-from",
                )
            ]
        )


def read_parent(folder: Path) -> ParentModel:
    """What the parent's model folder holds: an adapter (`adapter_config.json`) or full weights; else refused."""
    folder = Path(folder)
    adapter_config = folder / ADAPTER_CONFIG_FILE
    if adapter_config.is_file():
        return ParentModel(folder, "adapter", json.loads(adapter_config.read_text(encoding="utf-8")))
    if any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS) and (folder / "config.json").is_file():
        return ParentModel(folder, "merged", None)
    raise ModelLoadError(
        f"{folder}: the starting model holds neither an adapter ({ADAPTER_CONFIG_FILE}) "
        "nor full weights (config.json and .safetensors files)"
    )


def check_same_architecture(parent: ParentModel, base_model_config: Any) -> None:
    """Refuse parent weights whose architecture differs from the base's (they could not be the same model)."""
    parent_config = json.loads((parent.folder / "config.json").read_text(encoding="utf-8"))
    base_config = base_model_config.to_dict() if hasattr(base_model_config, "to_dict") else dict(base_model_config)
    differences = [
        f"{key} {parent_config.get(key)!r} (base: {base_config.get(key)!r})"
        for key in _SHAPE_KEYS
        if key in parent_config and key in base_config and parent_config[key] != base_config[key]
    ]
    if differences:
        raise ModelLoadError(
            f"{parent.folder}: the starting job's weights are not the base model's architecture: "
            + ", ".join(differences)
            + ". A job can only start from a model trained on the same base"
        )


def refuse_nested_parent_weights(parent: ParentModel) -> None:
    """Refuse an adapter that was itself trained on another job's full weights (those weights are not fetched).

    Its pin says so (`base_kind`) in a final model; a checkpoint holds the run config instead.
    """
    if parent.form != "adapter":
        return
    pin = _read_json(parent.folder / "tunedeck_pin.json")
    run_config = _read_json(parent.folder / CHECKPOINT_CONFIG)
    if pin.get("base_kind") == "parent_weights" or (run_config.get("init_from") or {}).get("how") == "weights":
        raise ModelLoadError(
            f"{parent.folder}: this adapter was trained on another job's full weights, not on the base model; "
            "start from a job whose adapter was trained on the base, or from full weights"
        )


def _read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return data if isinstance(data, dict) else {}


def start_from_parent(
    network: Any, parent: ParentModel, config: TrainingConfig, qlora: bool
) -> tuple[Any, StartingPoint]:
    """Apply the parent's model to the loaded base `network`; the model to train and how it started.

    Parent full weights were loaded in place of the base already (`ParentModel.weights_folder`):
    the caller adds a new adapter as usual. An adapter parent is continued (PEFT) or merged (full).
    """
    if parent.form == "merged":
        fingerprint = fingerprint_model_dir(parent.folder)
        return network, StartingPoint("weights", "merged", parent_weights_fingerprint=fingerprint)
    refuse_nested_parent_weights(parent)
    from peft import PeftModel

    if not config.use_peft:
        merged = PeftModel.from_pretrained(network, str(parent.folder)).merge_and_unload()
        for parameter in merged.parameters():
            parameter.requires_grad_(True)
        return merged, StartingPoint("merged_adapter", "adapter")
    if qlora:
        from peft import prepare_model_for_kbit_training

        network = prepare_model_for_kbit_training(network, use_gradient_checkpointing=gradient_checkpointing_on(config))
    model = PeftModel.from_pretrained(network, str(parent.folder), adapter_name=TRAINED_ADAPTER, is_trainable=True)
    if uses_reference_adapter(config):
        model.load_adapter(str(parent.folder), adapter_name=REFERENCE_ADAPTER, is_trainable=False)
        model.set_adapter(TRAINED_ADAPTER)  # the trained adapter stays active; `ref` stays frozen
    save_only_trained_adapter(model)
    return model, StartingPoint("adapter", "adapter", notes=tuple(adapter_differences(parent, config)))


def uses_reference_adapter(config: TrainingConfig) -> bool:
    """Whether the run's loss compares with a frozen copy of the starting adapter (dpo, kto with a reference)."""
    return config.task in REFERENCE_TASKS and not config.reference_free


def adapter_differences(parent: ParentModel, config: TrainingConfig) -> list[str]:
    """One sentence per LoRA setting the config asks for that differs from the continued adapter's."""
    saved = parent.adapter_config or {}
    pairs: dict[str, tuple[Any, Any]] = {
        "lora_r": (config.lora_r, saved.get("r")),
        "lora_alpha": (config.lora_alpha, saved.get("lora_alpha")),
        "lora_target_modules": (config.lora_target_modules, saved.get("target_modules")),
    }
    notes = []
    for key, (asked, kept) in pairs.items():
        if kept is None or not config.user_set(key) or _same_setting(asked, kept):
            continue
        notes.append(
            f"{key} {asked!r} is not applied: the run continues the starting job's adapter, "
            f"which keeps its {key} {kept!r}"
        )
    return notes


def _same_setting(asked: Any, kept: Any) -> bool:
    # peft stores target modules as a set (saved as a list in any order) and alpha as a number.
    if isinstance(asked, list) and isinstance(kept, list):
        return sorted(asked) == sorted(kept)
    if isinstance(asked, (int, float)) and isinstance(kept, (int, float)):
        return float(asked) == float(kept)
    return bool(asked == kept)


def save_only_trained_adapter(model: Any) -> None:
    """Make `model.save_pretrained` write the trained adapter alone (never the frozen `ref`), unless told otherwise.

    peft saves every loaded adapter by default, each other than `default` in a subfolder; a
    checkpoint or final model holding `ref` would be resumed with it as a second adapter.
    """
    save = type(model).save_pretrained

    @functools.wraps(save)
    def save_trained(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("selected_adapters", [TRAINED_ADAPTER])
        return save(model, *args, **kwargs)

    # An instance attribute, so the Trainer's and the engine's saves both go through it.
    object.__setattr__(model, "save_pretrained", save_trained)
