"""Evaluation metrics by task: loss/perplexity, classification, extraction, generation.

Pure functions over predictions and references; no model code here, so the
metrics can score outputs produced anywhere. Importing this package registers
nothing: the registry loads the built-ins itself (`tunedeck.eval.registry`).
"""

from tunedeck.eval.metrics.classification import ClassificationReport, ClassMetrics, classification_metrics
from tunedeck.eval.metrics.extraction import (
    ExtractionExample,
    ExtractionReport,
    FieldMetrics,
    ParsedOutput,
    extraction_metrics,
    normalize_json_value,
    parse_json_object,
)
from tunedeck.eval.metrics.generation import (
    ENGLISH_ARTICLES,
    GenerationExample,
    GenerationReport,
    answer_tokens,
    generation_metrics,
    normalize_whitespace,
    token_f1,
)
from tunedeck.eval.metrics.inputs import MetricInputError, MetricInputs
from tunedeck.eval.metrics.loss import MAX_LOSS_FOR_PERPLEXITY, loss_metrics, perplexity

__all__ = [
    "ENGLISH_ARTICLES",
    "MAX_LOSS_FOR_PERPLEXITY",
    "ClassMetrics",
    "ClassificationReport",
    "ExtractionExample",
    "ExtractionReport",
    "FieldMetrics",
    "GenerationExample",
    "GenerationReport",
    "MetricInputError",
    "MetricInputs",
    "ParsedOutput",
    "answer_tokens",
    "classification_metrics",
    "extraction_metrics",
    "generation_metrics",
    "loss_metrics",
    "normalize_json_value",
    "normalize_whitespace",
    "parse_json_object",
    "perplexity",
    "token_f1",
]
