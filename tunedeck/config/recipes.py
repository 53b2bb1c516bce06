"""The recipes of the job config contract, shipped verbatim as JSON files next to this module.

After the contract's three, one recipe per preference task: LoRA with a learning rate a tenth of
instruction tuning's or less (preference losses move a model quickly), beta 0.1, one or two epochs.

A recipe means what it says: every key that sets its effective batch or its speed
(`batch_and_speed_keys`) is written in the recipe itself, so a change to the config defaults
never changes what a recipe trains on per optimizer step or how fast it runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue


@dataclass(frozen=True)
class Recipe:
    """A named, shipped config."""

    name: str
    title: str
    values: dict[str, Any]

    def config(self) -> TrainingConfig:
        """The recipe as a validated TrainingConfig."""
        return validate_config(self.values, source=f"recipe {self.name}")


# The keys every recipe states: micro-batch, accumulation (with the number of processes, the effective
# batch), and what sets the speed of a step (activation recomputation, sequence length, precision).
BATCH_AND_SPEED_KEYS: tuple[str, ...] = (
    "batch_size",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "max_length",
    "mixed_precision",
)


def batch_and_speed_keys(task: str) -> tuple[str, ...]:
    """The keys a recipe for `task` must state: `BATCH_AND_SPEED_KEYS`, and packing where the task packs (sft)."""
    return (*BATCH_AND_SPEED_KEYS, "packing") if task == "sft" else BATCH_AND_SPEED_KEYS


_TITLES = {
    "instruction-tuning-lora": "Instruction tuning (LoRA, 7B model, RTX 4090 or equivalent)",
    "full-finetune-small": "Full fine-tuning (small model, A100 80 GB)",
    "quick-experiment": "Quick experiment (GPT-2, fast iteration)",
    "dpo-lora": "Preference tuning, DPO (LoRA, chosen/rejected pairs, after instruction tuning)",
    "orpo-lora": "Preference tuning, ORPO (LoRA, chosen/rejected pairs, no reference model)",
    "kto-lora": "Preference tuning, KTO (LoRA, answers marked desirable or undesirable)",
}


def list_recipes() -> list[Recipe]:
    """Every shipped recipe: the job config contract's, in its order, then the preference tasks'."""
    return [get_recipe(name) for name in _TITLES]


def get_recipe(name: str) -> Recipe:
    """One recipe by name; ConfigError naming the valid names otherwise."""
    if name not in _TITLES:
        valid = ", ".join(_TITLES)
        raise ConfigError([Issue(f'unknown recipe "{name}"', field="recipe", expected=f"one of {valid}")])
    text = resources.files("tunedeck.config").joinpath("recipes", f"{name}.json").read_text("utf-8")
    return Recipe(name=name, title=_TITLES[name], values=json.loads(text))
