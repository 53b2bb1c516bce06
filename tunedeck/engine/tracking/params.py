"""A job's config as tracker parameters: flat names, text values."""

from __future__ import annotations

import json
from typing import Any

from tunedeck.config.training import TrainingConfig


def run_params(config: TrainingConfig, model: str) -> dict[str, Any]:
    """Every config key with its value, and the base model."""
    return {**config.to_json_dict(), "base_model": model}


def param_text(value: Any) -> str:
    """A parameter as text: strings as they are, everything else as JSON (lists, objects, null)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
