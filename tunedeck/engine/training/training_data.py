"""Turning the train/validation files into token tensors the trainer batches.

Reading, validation and tokenizing (chat templates, loss masks) belong to the data layer;
this module picks the path per task, builds the label set for classification, and pads
batches so padding never counts towards the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.config.preference import is_preference_task
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import DataError, Issue
from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.data.task_kinds import SFT_KINDS as TASK_SFT_KINDS
from tunedeck.data.task_kinds import kind_issue

SFT_KINDS = frozenset(TASK_SFT_KINDS)


@dataclass
class ExampleDataset:
    """Examples as the collator reads them: `input_ids`, `labels` (and `position_ids` when packed).

    Preference examples hold `prompt_ids` with `chosen_ids`/`rejected_ids` (pairs) or with
    `completion_ids`/`label` (kto) instead; `example_tokens` and `example_length` read both.
    """

    features: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.features[index]

    def token_count(self) -> int:
        """Tokens over all examples (padding excluded; a pair counts its prompt and both answers)."""
        return sum(example_tokens(feature) for feature in self.features)


PREFERENCE_ANSWERS = ("chosen_ids", "rejected_ids", "completion_ids")
"""The answer columns of a preference example (a pair has the first two, a kto row the third)."""


def example_answers(feature: dict[str, Any]) -> list[str]:
    """The answer columns `feature` has (empty for an sft or classification example)."""
    return [column for column in PREFERENCE_ANSWERS if column in feature]


def example_tokens(feature: dict[str, Any]) -> int:
    """The tokens one example holds: its `input_ids`, or its prompt and every answer (prompt + chosen + rejected)."""
    answers = example_answers(feature)
    if not answers:
        return len(feature["input_ids"])
    return len(feature["prompt_ids"]) + sum(len(feature[column]) for column in answers)


def example_length(feature: dict[str, Any]) -> int:
    """The longest sequence the example puts in a batch: `input_ids`, or its prompt with its longest answer."""
    answers = example_answers(feature)
    if not answers:
        return len(feature["input_ids"])
    return len(feature["prompt_ids"]) + max(len(feature[column]) for column in answers)


@dataclass
class PreparedData:
    """Both splits, ready to batch, with what the run directory records about them.

    `tokenized` keeps the sft splits as the data layer returned them, so packing can regroup them.
    """

    train: ExampleDataset
    validation: ExampleDataset | None
    kind: str
    manifests: list[dict[str, Any]]
    label2id: dict[str, int] | None = None
    reports: dict[str, Any] = field(default_factory=dict)
    tokenized: dict[str, Any] = field(default_factory=dict)
    packed: bool = False
    contamination: dict[str, Any] | None = None

    def set_split(self, role: str, dataset: ExampleDataset) -> None:
        """Put `dataset` in place as the "train" or the "validation" split."""
        if role == "train":
            self.train = dataset
        else:
            self.validation = dataset


def load_rows(path: Path, role: str) -> Any:
    """Load one dataset file through the data layer; the manifest gets the split's role."""
    from tunedeck.data.loading import load_dataset

    if not Path(path).is_file():
        raise DataError([Issue(f"{role} data file not found", file=str(path))])
    return load_dataset(Path(path))


def read_splits(config: TrainingConfig, train_path: Path, validation_path: Path | None) -> tuple[Any, Any]:
    """Load and check both splits: same kind, a kind that fits the task."""
    train = load_rows(train_path, "training")
    validation = load_rows(validation_path, "validation") if validation_path is not None else None
    for loaded, path in ((train, train_path), (validation, validation_path)):
        if loaded is None:
            continue
        mismatch = kind_issue(loaded.kind, config.task, file=str(path))
        if mismatch is not None:
            raise DataError([mismatch])
        if not loaded.rows:
            raise DataError([Issue("the dataset has no rows", file=str(path))])
    # kto trains on unpaired rows and may be validated on pairs (each pair ranks its two answers).
    if validation is not None and validation.kind != train.kind and not is_preference_task(config.task):
        raise DataError(
            [
                Issue(
                    "validation rows have a different kind than training rows",
                    file=str(validation_path),
                    expected=train.kind,
                    found=validation.kind,
                )
            ]
        )
    return train, validation


def label_index(train: Any, validation: Any, validation_path: Path | None) -> dict[str, int]:
    """Class index per label, sorted so the mapping does not depend on row order."""
    labels = sorted({str(row["label"]) for row in train.rows})
    if len(labels) < 2:
        raise DataError([Issue("classification needs at least two labels", field="label", found=str(labels))])
    if validation is not None:
        unseen = sorted({str(row["label"]) for row in validation.rows} - set(labels))
        if unseen:
            raise DataError(
                [
                    Issue(
                        "validation labels never seen in training",
                        file=str(validation_path),
                        field="label",
                        expected=f"one of {labels}",
                        found=str(unseen),
                    )
                ]
            )
    return {label: index for index, label in enumerate(labels)}


def prepare_data(
    config: TrainingConfig,
    tokenizer: Any,
    train_path: Path,
    validation_path: Path | None,
    cache_dir: Path | None = None,
) -> PreparedData:
    """Load, check and tokenize both splits for `config.task`.

    With `cache_dir`, tokenization is reused from the cache when the dataset, tokenizer,
    template, max_length and task are the same (a second job over the same data).
    """
    from tunedeck.data.cache import prepare_dataset

    train, validation = read_splits(config, train_path, validation_path)
    contamination = contamination_between(train, validation)
    manifests = split_manifests(train, validation)
    label2id = label_index(train, validation, validation_path) if config.task == "classification" else None
    prepared = PreparedData(ExampleDataset([]), None, train.kind, manifests, label2id, contamination=contamination)
    for role, loaded in (("train", train), ("validation", validation)):
        if loaded is None:
            continue
        encoded = prepare_dataset(
            loaded.rows,
            loaded.kind,
            tokenizer,
            max_length=config.max_length,
            task=config.task,
            train_on_inputs=config.train_on_inputs,
            truncation=config.truncation,
            cache_dir=cache_dir,
            dataset_hash=loaded.manifest.sha256,
            label2id=label2id,
            row_numbers=loaded.line_numbers,
            source=str(loaded.path),
        )
        if encoded.classification is not None:
            classes = encoded.classification
            dataset = ExampleDataset(
                [
                    {"input_ids": list(ids), "labels": int(label)}
                    for ids, label in zip(classes.input_ids, classes.labels, strict=True)
                ]
            )
        else:
            assert encoded.tokenized is not None
            tokenized = encoded.tokenized
            prepared.reports[role] = {**tokenized.report.to_dict(), "cache_hit": encoded.cache_hit}
            prepared.tokenized[role] = tokenized
            dataset = ExampleDataset(
                [
                    {"input_ids": list(ids), "labels": list(labels)}
                    for ids, labels in zip(tokenized.input_ids, tokenized.labels, strict=True)
                ]
            )
        prepared.set_split(role, dataset)
    return prepared


def split_manifests(train: Any, validation: Any) -> list[dict[str, Any]]:
    """The manifest of each loaded split, with its role, as the run directory records them.

    A split read from a registered version keeps the licence and rights note recorded for it (in its notes).
    """
    from tunedeck.data.registry import registered_rights

    manifests = []
    for role, loaded in (("train", train), ("validation", validation)):
        if loaded is None:
            continue
        manifest = loaded.manifest.to_dict()
        rights = registered_rights(Path(loaded.path), manifest["sha256"]) if getattr(loaded, "path", None) else {}
        if rights:
            manifest["notes"] = {**(manifest.get("notes") or {}), **rights}
        manifests.append({"role": role, **manifest})
    return manifests


def contamination_between(train: Any, validation: Any) -> dict[str, Any] | None:
    """Exact and near duplicates shared by the training and validation data (the experiment method).

    Overlap makes the validation metrics flatter the model; the run records it
    (`data_manifest.json`) and warns, and the job report lists it as a limit.
    """
    if validation is None:
        return None
    from tunedeck.data.dedup import find_duplicates

    return find_duplicates({"train": train, "validation": validation}).contamination_record()


def pack_splits(prepared: PreparedData, max_length: int) -> None:
    """Regroup the sft splits into packed rows of at most `max_length` tokens (in place)."""
    from tunedeck.data.packing import pack_examples, packed_features, packing_efficiency

    for role, tokenized in prepared.tokenized.items():
        packs = pack_examples(tokenized, max_length)
        dataset = ExampleDataset(packed_features(tokenized, packs))
        prepared.reports.setdefault(role, {})["packing"] = {
            "examples": len(tokenized),
            "rows": len(packs),
            "efficiency": packing_efficiency(packs, max_length),
        }
        prepared.set_split(role, dataset)
    prepared.packed = True


class PaddingCollator:
    """Right-pads a batch; padded positions get attention 0 and label -100 (never in the loss)."""

    def __init__(self, pad_token_id: int, task: str) -> None:
        self.pad_token_id = pad_token_id
        self.task = task

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """Stack `examples` into tensors of the longest example's length."""
        import torch

        width = max(len(example["input_ids"]) for example in examples)
        input_ids, attention, labels = [], [], []
        for example in examples:
            ids = list(example["input_ids"])
            pad = width - len(ids)
            input_ids.append(ids + [self.pad_token_id] * pad)
            attention.append([1] * len(ids) + [0] * pad)
            if self.task != "classification":
                labels.append(list(example["labels"]) + [IGNORE_INDEX] * pad)
        batch = {
            "input_ids": torch.tensor(input_ids, dtype=torch.long),
            "attention_mask": torch.tensor(attention, dtype=torch.long),
        }
        if self.task == "classification":
            batch["labels"] = torch.tensor([int(example["labels"]) for example in examples], dtype=torch.long)
        else:
            batch["labels"] = torch.tensor(labels, dtype=torch.long)
        return batch
