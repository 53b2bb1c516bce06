"""`evaluate_model`: run one evaluation procedure on a model and score it with the metric registry.

Every evaluation reports the loss and perplexity, computed on exactly the tokens
training computes its loss on (`tokenize_rows` for language-modelling rows,
`encode_classification` for labelled rows). The loss is the mean over those
tokens (over examples for classification), not a mean of batch means, so it does
not depend on the batch size.

Then, by task: classification takes the arg-max class of each example;
extraction and generation decode an answer greedily (`decoding`). The metric
registry scores the predictions, so custom metrics apply without changes here.

torch and transformers are imported inside the functions: the CLI imports this
module's package without paying for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.data.manifest import content_sha256
from tunedeck.eval.language_model_scoring import evaluate_language_model, right_padded, score_metrics
from tunedeck.eval.preference_scoring import evaluate_preference
from tunedeck.eval.procedure import (
    DEFAULT_EVAL_BATCH_SIZE,
    EvaluationProcedure,
    GenerationSettings,
    default_required_fields,
)
from tunedeck.eval.result import EvaluationResult


def make_procedure(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    *,
    task: str,
    max_length: int,
    batch_size: int = DEFAULT_EVAL_BATCH_SIZE,
    generation: GenerationSettings | None = None,
    required_fields: Sequence[str] | None = None,
    schema: Mapping[str, Any] | None = None,
    labels: Sequence[str] | None = None,
    train_on_inputs: bool = False,
    metric_names: Sequence[str] | None = None,
    truncation: str = "refuse",
    max_prompt_length: int | None = None,
) -> EvaluationProcedure:
    """The procedure for `rows`: explicit settings plus what the rows fix (content hash, fields, labels).

    Unless given, extraction requires the fields every reference has, and
    classification uses the sorted labels of the rows.
    """
    if task == "extraction" and required_fields is None:
        required_fields = default_required_fields([row["output"] for row in rows])
    if task == "classification" and labels is None:
        labels = sorted({str(row["label"]) for row in rows})
    return EvaluationProcedure(
        task=task,
        data_kind=kind,
        data_sha256=content_sha256(rows),
        num_examples=len(rows),
        max_length=max_length,
        batch_size=batch_size,
        train_on_inputs=train_on_inputs,
        truncation=truncation,
        generation=generation or GenerationSettings(),
        labels=tuple(str(label) for label in labels or ()),
        required_fields=tuple(required_fields or ()),
        json_schema=schema,
        metric_names=tuple(metric_names) if metric_names is not None else None,
        max_prompt_length=max_prompt_length,
    )


def evaluate_model(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    *,
    task: str,
    max_length: int,
    batch_size: int = DEFAULT_EVAL_BATCH_SIZE,
    generation: GenerationSettings | None = None,
    required_fields: Sequence[str] | None = None,
    schema: Mapping[str, Any] | None = None,
    labels: Sequence[str] | None = None,
    train_on_inputs: bool = False,
    metric_names: Sequence[str] | None = None,
) -> EvaluationResult:
    """Evaluate `model` on `rows` (of data kind `kind`) for `task`; see the module docstring.

    For classification without `labels`, the model's own label names are used.
    """
    if task == "classification" and labels is None:
        labels = _model_labels(model)
    procedure = make_procedure(
        rows,
        kind,
        task=task,
        max_length=max_length,
        batch_size=batch_size,
        generation=generation,
        required_fields=required_fields,
        schema=schema,
        labels=labels,
        train_on_inputs=train_on_inputs,
        metric_names=metric_names,
    )
    return run_procedure(model, tokenizer, rows, procedure)


def run_procedure(
    model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure
) -> EvaluationResult:
    """Evaluate `model` on `rows` with a fixed procedure; refuses rows the procedure was not made for."""
    if content_sha256(rows) != procedure.data_sha256:
        raise ConfigError(
            [
                Issue(
                    "the rows differ from the data this evaluation procedure was fixed on",
                    field="data_sha256",
                    expected=procedure.data_sha256,
                    found=content_sha256(rows),
                )
            ],
            title="evaluation data changed",
        )
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        if procedure.task == "classification":
            return _evaluate_classification(model, tokenizer, rows, procedure)
        if procedure.task == "preference":
            return evaluate_preference(model, tokenizer, rows, procedure)
        return evaluate_language_model(model, tokenizer, rows, procedure)
    finally:
        if was_training:
            model.train()


def _model_labels(model: Any) -> list[str]:
    id2label = getattr(model.config, "id2label", None) or {}
    return [str(id2label[index]) for index in sorted(id2label, key=int)]


def _head_indices(model: Any, labels: Sequence[str]) -> dict[str, int]:
    """Which output of the classification head each label is: the model's own mapping when it has one."""
    label2id = {str(key): int(value) for key, value in (getattr(model.config, "label2id", None) or {}).items()}
    if set(labels) <= set(label2id):
        return {label: label2id[label] for label in labels}
    if len(labels) == int(getattr(model.config, "num_labels", 0)):
        return {label: index for index, label in enumerate(labels)}
    raise ConfigError(
        [
            Issue(
                "the model's classification head does not match the evaluation labels",
                field="labels",
                expected=f"labels among {sorted(label2id)} or {getattr(model.config, 'num_labels', '?')} labels",
                found=str(list(labels)),
            )
        ]
    )


def _evaluate_classification(
    model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure
) -> EvaluationResult:
    import torch
    import torch.nn.functional as F

    from tunedeck.data.tokenize import encode_classification

    heads = _head_indices(model, procedure.labels)
    encoded = encode_classification(rows, tokenizer, max_length=procedure.max_length, label2id=heads)
    label_of = {index: label for label, index in heads.items()}
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    losses: list[float] = []
    predictions: list[str] = []
    for start in range(0, len(encoded), procedure.batch_size):
        ids = [list(row) for row in encoded.input_ids[start : start + procedure.batch_size]]
        input_ids, attention = right_padded(ids, pad, device)
        targets = torch.tensor(encoded.labels[start : start + procedure.batch_size], device=device)
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attention).logits.float()
        losses.extend(F.cross_entropy(logits, targets, reduction="none").tolist())
        predictions.extend(label_of.get(int(index), f"<head output {int(index)}>") for index in logits.argmax(-1))
    references = [str(row["label"]) for row in rows]
    metrics = score_metrics(procedure, sum(losses) / len(losses), predictions, references)
    truncated = set(encoded.report.truncated_rows)
    examples = [
        {
            "index": index,
            "reference": reference,
            "prediction": prediction,
            "correct": reference == prediction,
            "loss": loss,
            "truncated": index in truncated,
        }
        for index, (reference, prediction, loss) in enumerate(zip(references, predictions, losses, strict=True))
    ]
    return EvaluationResult(procedure, metrics, examples, encoded.report.to_dict())
