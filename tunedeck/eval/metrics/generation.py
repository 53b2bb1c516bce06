"""Free-text generation metrics: exact match and token-level F1.

Normalisation (documented once here):

- Exact match compares texts after whitespace normalisation only: leading and
  trailing whitespace removed and every run of whitespace (spaces, tabs, line
  breaks) collapsed to one space. Case and punctuation still count, since for an
  answer format they usually matter.
- Token F1 is the usual reading-comprehension score: both texts are lowercased,
  punctuation characters (any Unicode punctuation) are deleted, the articles
  `a`, `an`, `the` are dropped (pass `articles=` for another language), and the
  remaining whitespace-separated tokens are compared as multisets. Two texts
  that are both empty after this score 1.0; one empty side scores 0.0.
- A reference may be one string or a list of acceptable strings; an example
  scores the best value over its references.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.eval.metrics.inputs import MetricInputError, check_aligned

ENGLISH_ARTICLES: frozenset[str] = frozenset({"a", "an", "the"})

_WHITESPACE = re.compile(r"\s+")

Reference = str | Sequence[str]


def normalize_whitespace(text: str) -> str:
    """Strip the ends and collapse each whitespace run to one space."""
    return _WHITESPACE.sub(" ", text).strip()


def answer_tokens(text: str, *, articles: frozenset[str] = ENGLISH_ARTICLES) -> list[str]:
    """Lowercased tokens without punctuation or articles, as token F1 compares them."""
    lowered = text.lower()
    without_punctuation = "".join(ch for ch in lowered if not unicodedata.category(ch).startswith("P"))
    return [token for token in without_punctuation.split() if token not in articles]


def token_f1(prediction: str, reference: str, *, articles: frozenset[str] = ENGLISH_ARTICLES) -> float:
    """Harmonic mean of token precision and recall between two texts (module rules)."""
    predicted = answer_tokens(prediction, articles=articles)
    expected = answer_tokens(reference, articles=articles)
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted)
    recall = common / len(expected)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class GenerationExample:
    """Scores of one prediction against its best reference."""

    index: int
    exact_match: bool
    token_f1: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"index": self.index, "exact_match": self.exact_match, "token_f1": self.token_f1}


@dataclass(frozen=True)
class GenerationReport:
    """Mean exact match and token F1 over an evaluation set."""

    num_examples: int
    exact_match: float
    token_f1: float
    examples: list[GenerationExample]

    def to_dict(self, *, include_examples: bool = True) -> dict[str, Any]:
        """JSON-ready form."""
        result: dict[str, Any] = {
            "num_examples": self.num_examples,
            "exact_match": self.exact_match,
            "token_f1": self.token_f1,
        }
        if include_examples:
            result["examples"] = [example.to_dict() for example in self.examples]
        return result


def _as_reference_list(reference: Reference, index: int) -> list[str]:
    options = [reference] if isinstance(reference, str) else list(reference)
    if not options or not all(isinstance(option, str) for option in options):
        raise MetricInputError(
            f"generation metrics: reference {index} must be a string or a non-empty list of strings"
        )
    return options


def generation_metrics(
    predictions: Sequence[str],
    references: Sequence[Reference],
    *,
    articles: frozenset[str] = ENGLISH_ARTICLES,
) -> GenerationReport:
    """Exact match and token F1 of each prediction against its reference(s), and their means."""
    check_aligned(predictions, references, "generation metrics")
    examples = []
    for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        options = _as_reference_list(reference, index)
        normalized = normalize_whitespace(prediction)
        examples.append(
            GenerationExample(
                index=index,
                exact_match=any(normalized == normalize_whitespace(option) for option in options),
                token_f1=max(token_f1(prediction, option, articles=articles) for option in options),
            )
        )
    count = len(examples)
    return GenerationReport(
        num_examples=count,
        exact_match=sum(example.exact_match for example in examples) / count,
        token_f1=sum(example.token_f1 for example in examples) / count,
        examples=examples,
    )
