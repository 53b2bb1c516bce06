"""Preference specs for the preflight tests: pairs tokenized here, handed to the run as its prepared data.

The data layer's preference tokenizer is not what these tests check, so `prepare_preference_data`
is replaced (in the module the run reads it from) by one that builds the same columns directly
from a tiny tokenizer: `prompt_ids`/`chosen_ids`/`rejected_ids`, or kto's unpaired rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.engine.engine_data import fast_config
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec

NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def pair_texts(count: int) -> list[dict[str, str]]:
    """`count` prompts, each with a right (chosen) and a wrong (rejected) answer."""
    rows = []
    for index in range(count):
        word = NUMBERS[index % len(NUMBERS)]
        rows.append(
            {
                "prompt": f"Spell the number {index % 10 + 1} in words.",
                "chosen": f" The number is {word}, spelled out in full.",
                "rejected": " I would rather not answer that question today.",
            }
        )
    return rows


def pair_features(tokenizer: Any, rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each pair as the columns the preference trainers read (answers end with the end-of-sequence token)."""
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    return [
        {
            "prompt_ids": tokenizer(row["prompt"])["input_ids"],
            "chosen_ids": tokenizer(row["chosen"], add_special_tokens=False)["input_ids"] + eos,
            "rejected_ids": tokenizer(row["rejected"], add_special_tokens=False)["input_ids"] + eos,
        }
        for row in rows
    ]


@pytest.fixture
def pretokenized_pairs() -> Iterator[None]:
    """`prepare_preference_data` replaced by one that tokenizes the spec's pairs file directly."""
    from tunedeck.engine.preference import data as preference_data
    from tunedeck.engine.training.training_data import ExampleDataset, PreparedData

    def prepare(config: Any, tokenizer: Any, train_path: Path, validation_path: Path | None) -> PreparedData:
        rows = [json.loads(line) for line in Path(train_path).read_text().splitlines() if line.strip()]
        features = pair_features(tokenizer, rows)
        if config.task == "kto":
            features = preference_data.unpaired(features)
        report = {"rows": len(rows), "share_truncated": 0.0, "warnings": []}
        manifest = {"role": "train", "rows": len(rows), "path": str(train_path)}
        return PreparedData(ExampleDataset(features), None, "preference", [manifest], reports={"train": report})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preference_data, "prepare_preference_data", prepare)
        yield


def preference_spec(model: Path, folder: Path, rows: int = 8, **config: Any) -> RunSpec:
    """A RunSpec over `rows` preference pairs with `fast_config(**config)`."""
    folder.mkdir(parents=True, exist_ok=True)
    train = folder / "pairs.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in pair_texts(rows)), encoding="utf-8")
    return RunSpec(fast_config(**config), ModelRef(str(model)), train, folder / "run")
