"""Baseline and final evaluation of a run, with one procedure fixed before training starts.

The engine builds a `BaselineEvaluator` from the run's config and validation rows,
calls `run_baseline` on the untrained starting model (before `trainer.train()`) and
`run_final` on the trained one. Both write their full result (metrics, per-example
outputs, procedure and its hash) into the run directory, as `baseline_eval.json`
and `final_eval.json`. `run_final` refuses to write a final evaluation whose
procedure hash differs from the baseline's, so the two files are comparable by
construction.

On resume the starting model is no longer in memory (the checkpoint is), so
`run_baseline` keeps an existing `baseline_eval.json` of the same procedure instead
of evaluating the checkpoint as if it were the baseline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.eval.procedure import (
    DEFAULT_EVAL_BATCH_SIZE,
    DEFAULT_MAX_NEW_TOKENS,
    EvaluationProcedure,
    GenerationSettings,
    eval_task_for,
)
from tunedeck.eval.result import BASELINE_EVAL_FILE, FINAL_EVAL_FILE, EvaluationResult
from tunedeck.eval.runner import make_procedure, run_procedure


class ProcedureMismatchError(ConfigError):
    """Two evaluations meant to be compared were not made with the same procedure."""


class BaselineEvaluator:
    """One evaluation procedure and its rows, applied identically before and after training."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure) -> None:
        self.rows = list(rows)
        self.procedure = procedure

    @classmethod
    def for_run(
        cls,
        config: Any,
        rows: Sequence[Mapping[str, Any]],
        kind: str,
        *,
        label2id: Mapping[str, int] | None = None,
        generation: GenerationSettings | None = None,
        batch_size: int | None = None,
        required_fields: Sequence[str] | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> BaselineEvaluator:
        """The evaluator of a training run: task, `max_length` and loss masking taken from its config.

        `config` is the run's `TrainingConfig` (its `eval_max_new_tokens` caps each answer unless
        `generation` is given); `label2id` is the head mapping the engine
        built (labels are reported in its index order). The batch size defaults to the
        training micro-batch, which is known to fit in memory.
        """
        labels = [label for label, _ in sorted(label2id.items(), key=lambda item: item[1])] if label2id else None
        procedure = make_procedure(
            rows,
            kind,
            task=eval_task_for(config.task, kind),
            max_length=config.max_length,
            batch_size=batch_size or int(getattr(config, "batch_size", DEFAULT_EVAL_BATCH_SIZE)),
            generation=generation or GenerationSettings(
                max_new_tokens=int(getattr(config, "eval_max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
            ),
            required_fields=required_fields,
            schema=schema,
            labels=labels,
            train_on_inputs=bool(getattr(config, "train_on_inputs", False)),
            truncation=str(getattr(config, "truncation", "refuse")),
            max_prompt_length=getattr(config, "max_prompt_length", None),
        )
        return cls(rows, procedure)

    @classmethod
    def from_file(
        cls, config: Any, path: Path, *, label2id: Mapping[str, int] | None = None, **settings: Any
    ) -> BaselineEvaluator:
        """`for_run` on the rows of a dataset file (the run's validation file), read by the data layer."""
        from tunedeck.data.loading import load_dataset

        loaded = load_dataset(Path(path))
        return cls.for_run(config, loaded.rows, loaded.kind, label2id=label2id, **settings)

    def evaluate(self, model: Any, tokenizer: Any) -> EvaluationResult:
        """Evaluate `model` with this evaluator's procedure, writing nothing."""
        return run_procedure(model, tokenizer, self.rows, self.procedure)

    def run_baseline(self, model: Any, tokenizer: Any, run_dir: Path) -> dict[str, Any]:
        """Evaluate the starting model and write `baseline_eval.json`; keep an existing one on resume."""
        path = Path(run_dir) / BASELINE_EVAL_FILE
        if path.is_file():
            existing = read_evaluation(path)
            check_same_procedure(existing, self._reference(), what=str(path))
            return existing
        document = self.evaluate(model, tokenizer).to_dict()
        write_json_atomic(path, document)
        return document

    def run_final(
        self, model: Any, tokenizer: Any, run_dir: Path, *, evaluated: EvaluationResult | None = None
    ) -> dict[str, Any]:
        """Evaluate the trained model and write `final_eval.json` (same procedure as the baseline's).

        `evaluated` is an evaluation of these very weights made with this evaluator (during the
        trainer's last evaluation): it is written instead of evaluating again.
        """
        baseline = Path(run_dir) / BASELINE_EVAL_FILE
        if baseline.is_file():
            check_same_procedure(read_evaluation(baseline), self._reference(), what=str(baseline))
        if evaluated is not None:
            check_same_procedure(evaluated.to_dict(), self._reference(), what="the evaluation made during training")
        document = (evaluated or self.evaluate(model, tokenizer)).to_dict()
        write_json_atomic(Path(run_dir) / FINAL_EVAL_FILE, document)
        return document

    def _reference(self) -> dict[str, Any]:
        return {"procedure": self.procedure.to_dict(), "procedure_sha256": self.procedure.sha256}


def read_evaluation(path: Path) -> dict[str, Any]:
    """A `baseline_eval.json` / `final_eval.json` document."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "metrics" not in data or "procedure_sha256" not in data:
        raise ConfigError(
            [Issue("not an evaluation result", file=str(path), expected="an object with metrics and procedure_sha256")]
        )
    return data


def check_same_procedure(document: Mapping[str, Any], reference: Mapping[str, Any], *, what: str) -> None:
    """Refuse to compare `document` with `reference` when their procedures differ; name what differs."""
    if document.get("procedure_sha256") == reference.get("procedure_sha256"):
        return
    differing = procedure_differences(document, reference) or ["procedure_sha256"]
    raise ProcedureMismatchError(
        [
            Issue(
                "was made with a different evaluation procedure, so it cannot be compared",
                file=what,
                field=", ".join(differing),
                expected=str(reference.get("procedure_sha256")),
                found=str(document.get("procedure_sha256")),
            )
        ],
        title="evaluation procedures differ",
    )


def procedure_differences(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    """Top-level procedure settings that differ between two evaluation documents."""
    left, right = first.get("procedure") or {}, second.get("procedure") or {}
    return sorted(key for key in set(left) | set(right) if left.get(key) != right.get(key))
