"""Registers tunedeck's built-in metrics; imported by the registry on first use, not by hand."""

from __future__ import annotations

from typing import Any

from tunedeck.eval.metrics.classification import classification_metrics
from tunedeck.eval.metrics.extraction import extraction_metrics
from tunedeck.eval.metrics.generation import generation_metrics
from tunedeck.eval.metrics.inputs import MetricInputError, MetricInputs
from tunedeck.eval.metrics.loss import loss_metrics
from tunedeck.eval.registry import ALL_TASKS, register_metric


@register_metric("loss", task=ALL_TASKS)
def loss(inputs: MetricInputs) -> dict[str, Any]:
    """Evaluation loss and perplexity (every task)."""
    if inputs.mean_loss is None:
        raise MetricInputError(
            "loss metric: the evaluation pass computed no loss (mean_loss is None); "
            "every evaluation reports eval_loss and eval_perplexity"
        )
    return dict(loss_metrics(inputs.mean_loss))


@register_metric("classification", task="classification")
def classification(inputs: MetricInputs) -> dict[str, Any]:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix."""
    return classification_metrics(inputs.references, inputs.predictions, inputs.labels).to_dict()


@register_metric("extraction", task="extraction")
def extraction(inputs: MetricInputs) -> dict[str, Any]:
    """JSON validity, per-field presence and exact match, and schema validity when a schema is given."""
    report = extraction_metrics(
        inputs.predictions,
        inputs.references,
        required_fields=inputs.required_fields,
        schema=inputs.json_schema,
    )
    return report.to_dict(include_examples=False)


@register_metric("generation", task="generation")
def generation(inputs: MetricInputs) -> dict[str, Any]:
    """Exact match and token F1 of generated texts against their references."""
    return generation_metrics(inputs.predictions, inputs.references).to_dict(include_examples=False)
