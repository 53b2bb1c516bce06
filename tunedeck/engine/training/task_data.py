"""Which preparation a run's data gets: preference rows for dpo, orpo and kto, else the sft/classification path.

It sits above both preparations (`training_data` and `engine.preference.data`, which builds on
`training_data`), so neither imports the other back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunedeck.config.preference import is_preference_task
from tunedeck.config.training import TrainingConfig
from tunedeck.engine.preference import data as preference_data
from tunedeck.engine.training.training_data import PreparedData, prepare_data


def prepare_task_data(
    config: TrainingConfig,
    tokenizer: Any,
    train_path: Path,
    validation_path: Path | None,
    cache_dir: Path | None = None,
) -> PreparedData:
    """Both splits prepared as `config.task` trains on them: preference rows for dpo, orpo and kto, else `prepare_data`.

    The one rule the run and the checks before it share, so both see the same examples.
    """
    if is_preference_task(config.task):
        # Looked up on the module when called, so a test can stand in for the preference tokenizer.
        return preference_data.prepare_preference_data(config, tokenizer, train_path, validation_path)
    return prepare_data(config, tokenizer, train_path, validation_path, cache_dir)
