"""The evaluation procedure: every setting that decides what an evaluation measures, and its hash.

The experiment method asks that the starting model and every variant be evaluated with the same
procedure, on the same data. A procedure is therefore a plain, JSON-able record
(task, data kind and content hash, truncation, batching, decoding, label set,
required fields, schema, metric names) and `sha256` is the hash of its canonical
JSON: two evaluations are comparable exactly when their hashes are equal.

Batch size is part of the procedure even though it should not change results:
left-padded batched decoding is deterministic but not bit-identical across batch
sizes on every kernel, so it is recorded rather than assumed away.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.errors import ConfigError, Issue

PROCEDURE_VERSION = 1
# Evaluation tasks; "sft" (plain text rows) has no decoding, only loss and perplexity; "preference"
# scores how the model ranks chosen over rejected answers (and decodes the chosen ones as references).
EVAL_TASKS = ("classification", "extraction", "generation", "sft", "preference")
PREFERENCE_KINDS = ("preference", "unpaired_preference")
DEFAULT_MAX_NEW_TOKENS = 128
DEFAULT_EVAL_BATCH_SIZE = 8


@dataclass(frozen=True)
class GenerationSettings:
    """How answers are decoded for evaluation: greedy (never sampled), at most `max_new_tokens`.

    Greedy decoding is the only mode: an evaluation that samples gives a different
    score on every run, so two variants could not be compared on it.
    """

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int):
            raise ConfigError([Issue("must be an integer", field="max_new_tokens", found=repr(self.max_new_tokens))])
        if self.max_new_tokens < 1:
            raise ConfigError([Issue("must be at least 1", field="max_new_tokens", found=str(self.max_new_tokens))])

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the fixed decoding choices spelled out so the record is self-explanatory."""
        return {"max_new_tokens": self.max_new_tokens, "do_sample": False, "num_beams": 1, "padding_side": "left"}


def eval_task_for(config_task: str, data_kind: str) -> str:
    """The evaluation task of a training job: from its config task and the kind of its rows."""
    if config_task == "classification" or data_kind == "classification":
        return "classification"
    if data_kind in PREFERENCE_KINDS:
        return "preference"
    if data_kind == "extraction":
        return "extraction"
    if data_kind in ("chat", "prompt_completion"):
        return "generation"
    return "sft"


@dataclass(frozen=True)
class EvaluationProcedure:
    """Everything that decides an evaluation's numbers (see the module docstring)."""

    task: str
    data_kind: str
    data_sha256: str
    num_examples: int
    max_length: int
    batch_size: int = DEFAULT_EVAL_BATCH_SIZE
    train_on_inputs: bool = False
    truncation: str = "refuse"  # the training config key: what happens to rows left with no trained token
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    labels: tuple[str, ...] = ()
    required_fields: tuple[str, ...] = ()
    json_schema: Mapping[str, Any] | None = None
    metric_names: tuple[str, ...] | None = None
    max_prompt_length: int | None = None  # preference rows: prompt tokens kept (from the end)

    def __post_init__(self) -> None:
        issues = []
        if self.task not in EVAL_TASKS and self.metric_names is None:
            issues.append(
                Issue(
                    "unknown evaluation task without named metrics",
                    field="task",
                    expected=" | ".join(EVAL_TASKS),
                    found=self.task,
                )
            )
        if self.max_length < 2:
            issues.append(Issue("must be at least 2", field="max_length", found=str(self.max_length)))
        if self.batch_size < 1:
            issues.append(Issue("must be at least 1", field="batch_size", found=str(self.batch_size)))
        if self.task == "classification" and len(self.labels) < 2:
            issues.append(
                Issue("classification needs at least two labels", field="labels", found=str(list(self.labels)))
            )
        if issues:
            raise ConfigError(issues, title="invalid evaluation procedure")

    @property
    def decodes(self) -> bool:
        """Whether this procedure generates answers: extraction, generation, preference pairs (the chosen one)."""
        pairs = self.task == "preference" and self.data_kind == "preference"
        return self.task in ("extraction", "generation") or pairs

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON form; `sha256` hashes exactly this."""
        out: dict[str, Any] = {
            "procedure_version": PROCEDURE_VERSION,
            "task": self.task,
            "data_kind": self.data_kind,
            "data_sha256": self.data_sha256,
            "num_examples": self.num_examples,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "train_on_inputs": self.train_on_inputs,
            "generation": self.generation.to_dict() if self.decodes else None,
            "labels": list(self.labels),
            "required_fields": list(self.required_fields),
            "json_schema": dict(self.json_schema) if self.json_schema is not None else None,
            "metric_names": list(self.metric_names) if self.metric_names is not None else None,
        }
        # Listed only when not the default, so procedures recorded before the key keep their hash.
        if self.truncation != "refuse":
            out["truncation"] = self.truncation
        if self.max_prompt_length is not None:
            out["max_prompt_length"] = self.max_prompt_length
        return out

    @property
    def sha256(self) -> str:
        """sha256 of the canonical JSON of `to_dict()`: equal hashes mean the same procedure."""
        text = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_required_fields(references: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Fields every reference object has, in the first reference's key order.

    Used when a job names no required fields: a field the reference data always
    fills is one the model is expected to produce.
    """
    if not references:
        return ()
    common = set(references[0])
    for reference in references[1:]:
        common &= set(reference)
    return tuple(key for key in references[0] if key in common)
