"""The train/validation files of a preference run, tokenized into the columns TRL's trainers read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.engine.training.training_data import (
    ExampleDataset,
    PreparedData,
    contamination_between,
    read_splits,
    split_manifests,
)


def prepare_preference_data(
    config: TrainingConfig, tokenizer: Any, train_path: Path, validation_path: Path | None
) -> PreparedData:
    """Load, check and tokenize both splits of a dpo, orpo or kto run.

    Rows become `prompt_ids`/`chosen_ids`/`rejected_ids` (pairs) or `prompt_ids`/`completion_ids`/
    `label` (kto); kto splits each pair into a desirable and an undesirable completion, as its
    trainer would. Truncation follows `max_length`, `max_prompt_length` and `truncation`, and the
    report of each split names the rows cut or left out.
    """
    from tunedeck.data.preference_tokens import tokenize_preference_rows

    train, validation = read_splits(config, train_path, validation_path)
    prepared = PreparedData(
        ExampleDataset([]), None, train.kind, split_manifests(train, validation),
        contamination=contamination_between(train, validation),
    )  # fmt: skip
    for role, loaded in (("train", train), ("validation", validation)):
        if loaded is None:
            continue
        features, report = tokenize_preference_rows(
            loaded.rows,
            tokenizer,
            kind=loaded.kind,
            max_length=config.max_length,
            max_prompt_length=config.max_prompt_length,
            truncation=config.truncation,
            file=str(loaded.path),
            row_numbers=loaded.line_numbers,
        )
        if config.task == "kto" and loaded.kind == "preference":
            features = unpaired(features)
            report = {**report, "unpaired": True}
        prepared.reports[role] = report
        prepared.set_split(role, ExampleDataset(features))
    return prepared


def unpaired(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each chosen/rejected pair as a desirable then an undesirable completion of its prompt.

    Alternating keeps both labels in every micro-batch of kto's sequential order, so each batch
    estimates its KL term from completions of both kinds.
    """
    rows: list[dict[str, Any]] = []
    for pair in pairs:
        rows.append({"prompt_ids": pair["prompt_ids"], "completion_ids": pair["chosen_ids"], "label": True})
        rows.append({"prompt_ids": pair["prompt_ids"], "completion_ids": pair["rejected_ids"], "label": False})
    return rows
