"""See examples after exactly the preprocessing training applies, and the dataset's token statistics.

`inspect_examples` runs the same `encode_rows` / `encode_classification` as training, then
describes the result: each token of the first examples tagged trained or masked (special
tokens flagged, the truncation point marked), token-length percentiles with a histogram, the
share of truncated rows and of trained tokens, and the label distribution for classification.
Rows that training would refuse are listed instead of raising, since seeing them is the point.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tunedeck.data.tokenize import (
    IGNORE_INDEX,
    TEMPLATE_VERSION,
    TruncationReport,
    encode_classification,
    encode_rows,
)

HISTOGRAM_BINS = 12


@dataclass(frozen=True)
class TokenView:
    """One token as the model sees it."""

    id: int
    text: str
    trained: bool
    special: bool


@dataclass
class InspectedExample:
    """One row after preprocessing: its tokens and what truncation removed."""

    index: int  # 0-based position in the dataset
    row_number: int | None  # source line, when known
    length: int  # tokens before truncation
    kept: int  # tokens after truncation
    trained_tokens: int
    tokens: list[TokenView]
    label: str | None = None  # classification only

    @property
    def truncated(self) -> bool:
        """Whether truncation cut this row (the cut falls after `tokens[-1]`)."""
        return self.length > self.kept

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, tokens as `{id, text, trained, special}`."""
        out = asdict(self)
        out["truncated"] = self.truncated
        out["cut_tokens"] = self.length - self.kept
        return out


@dataclass
class LengthStats:
    """Token lengths (before truncation): percentiles and a histogram of equal-width bins."""

    count: int
    mean: float
    p50: int
    p90: int
    p99: int
    max: int
    histogram: list[dict[str, int]] = field(default_factory=list)  # {start, end, count}, end exclusive


@dataclass
class InspectionReport:
    """What `tunedeck data inspect` prints and the dashboard renders (`to_dict`)."""

    kind: str
    max_length: int
    train_on_inputs: bool
    template_version: str
    chat_mask_method: str | None
    examples: list[InspectedExample]
    lengths: LengthStats
    truncation: TruncationReport
    label_distribution: dict[str, int] | None = None

    @property
    def share_truncated(self) -> float:
        """Rows cut by truncation / rows."""
        return self.truncation.share_truncated

    @property
    def trainable_token_share(self) -> float | None:
        """Trained tokens / tokens kept (None for classification, which trains on a label)."""
        return None if self.kind == "classification" else self.truncation.trainable_token_share

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form of the whole report."""
        return {
            "kind": self.kind,
            "max_length": self.max_length,
            "train_on_inputs": self.train_on_inputs,
            "template_version": self.template_version,
            "chat_mask_method": self.chat_mask_method,
            "examples": [example.to_dict() for example in self.examples],
            "lengths": asdict(self.lengths),
            "share_truncated": self.share_truncated,
            "trainable_token_share": self.trainable_token_share,
            "truncation": self.truncation.to_dict(),
            "label_distribution": self.label_distribution,
        }


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of already sorted values (0 when empty)."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return int(sorted_values[rank - 1])


def length_stats(lengths: Sequence[int], bins: int = HISTOGRAM_BINS) -> LengthStats:
    """Percentiles p50/p90/p99/max and an equal-width histogram from 0 to the longest row."""
    ordered = sorted(lengths)
    longest = ordered[-1] if ordered else 0
    width = max(1, math.ceil((longest + 1) / bins))
    counts = Counter(length // width for length in ordered)
    histogram = [
        {"start": b * width, "end": (b + 1) * width, "count": counts.get(b, 0)}
        for b in range(math.ceil((longest + 1) / width))
    ]
    return LengthStats(
        count=len(ordered),
        mean=sum(ordered) / len(ordered) if ordered else 0.0,
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        max=longest,
        histogram=histogram,
    )


def _token_views(tokenizer: Any, ids: Sequence[int], labels: Sequence[int] | None) -> list[TokenView]:
    special = set(getattr(tokenizer, "all_special_ids", []))
    texts = tokenizer.batch_decode([[token] for token in ids], skip_special_tokens=False)
    return [
        TokenView(int(token), str(text), labels is not None and labels[i] != IGNORE_INDEX, token in special)
        for i, (token, text) in enumerate(zip(ids, texts, strict=True))
    ]


def inspect_examples(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    tokenizer: Any,
    *,
    max_length: int,
    n: int = 5,
    train_on_inputs: bool = False,
    row_numbers: Sequence[int] | None = None,
    truncation: str = "refuse",
) -> InspectionReport:
    """Preprocess every row as training does; show the first `n` and statistics over all.

    `truncation` "truncate_prompt" cuts prompts as training would; no mode drops a row here.
    """
    if kind == "classification":
        encoded = encode_classification(rows, tokenizer, max_length=max_length, row_numbers=row_numbers)
        report = encoded.report
        examples = [
            InspectedExample(
                i,
                row_numbers[i] if row_numbers else None,
                report.lengths[i],
                len(encoded.input_ids[i]),
                0,
                _token_views(tokenizer, encoded.input_ids[i], None),
                label=str(rows[i]["label"]),
            )
            for i in range(min(n, len(rows)))
        ]
        distribution = dict(sorted(Counter(str(r["label"]) for r in rows).items()))
        return InspectionReport(
            kind,
            max_length,
            train_on_inputs,
            TEMPLATE_VERSION,
            None,
            examples,
            length_stats(report.lengths),
            report,
            distribution,
        )
    tokenized = encode_rows(
        rows, kind, tokenizer, max_length=max_length, train_on_inputs=train_on_inputs, row_numbers=row_numbers,
        truncation=truncation,
    )
    report = tokenized.report
    examples = []
    for i in range(min(n, len(rows))):
        ids, labels = tokenized.input_ids[i], tokenized.labels[i]
        trained = len(labels) - labels.count(IGNORE_INDEX)
        examples.append(
            InspectedExample(
                i,
                row_numbers[i] if row_numbers else None,
                report.lengths[i],
                len(ids),
                trained,
                _token_views(tokenizer, ids, labels),
            )
        )
    return InspectionReport(
        kind,
        max_length,
        train_on_inputs,
        TEMPLATE_VERSION,
        tokenized.chat_mask_method,
        examples,
        length_stats(report.lengths),
        report,
    )
