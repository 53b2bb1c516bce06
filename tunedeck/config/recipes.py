"""The recipes of the job config contract, shipped verbatim as JSON files next to this module."""

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


_TITLES = {
    "instruction-tuning-lora": "Instruction tuning (LoRA, 7B model, RTX 4090 or equivalent)",
    "full-finetune-small": "Full fine-tuning (small model, A100 80 GB)",
    "quick-experiment": "Quick experiment (GPT-2, fast iteration)",
}


def list_recipes() -> list[Recipe]:
    """Every shipped recipe, in the order the job config contract gives them."""
    return [get_recipe(name) for name in _TITLES]


def get_recipe(name: str) -> Recipe:
    """One recipe by name; ConfigError naming the valid names otherwise."""
    if name not in _TITLES:
        valid = ", ".join(_TITLES)
        raise ConfigError([Issue(f'unknown recipe "{name}"', field="recipe", expected=f"one of {valid}")])
    text = resources.files("tunedeck.config").joinpath("recipes", f"{name}.json").read_text("utf-8")
    return Recipe(name=name, title=_TITLES[name], values=json.loads(text))
