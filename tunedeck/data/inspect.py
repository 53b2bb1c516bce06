"""See examples after exactly the preprocessing training applies, and the dataset's token statistics.

`inspect_examples` runs the same `encode_rows` / `encode_classification` as training, then
describes the result: each token of the first examples tagged trained or masked (special
tokens flagged, the truncation point marked), token-length percentiles with a histogram, the
share of truncated rows and of trained tokens, and the label distribution for classification.
Rows that training would refuse are listed instead of raising, since seeing them is the point.

A character whose UTF-8 bytes are split across tokens (byte-level tokenizers do that to "é"
or an emoji) decodes as "\ufffd" one token at a time, so such consecutive tokens are shown as
one `TokenView` holding all their ids and the whole character. When the tokens of such a group
are marked differently (the loss mask starts or ends inside the character, which no text
boundary can show), the group takes the marking of most of its tokens, trained on a tie
since the loss does see part of it, and is flagged `mixed`; the example's `trained_tokens`
still counts tokens, not groups.

Preference rows (`preference`, `unpaired_preference`) go through the same rendering and
truncation as their training (`preference_tokens.fit_rows`); each example shows its prompt
(masked) and its answers (trained), chosen and rejected or the completion with its label, as
`spans`, each with the tokens truncation cut from it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tunedeck.data.formats.preference import ANSWER_FIELDS
from tunedeck.data.preference_tokens import FittedRow, fit_rows, preference_report
from tunedeck.data.tokenize import (
    IGNORE_INDEX,
    TEMPLATE_VERSION,
    TruncationReport,
    encode_classification,
    encode_rows,
)

HISTOGRAM_BINS = 12
MAX_SPLIT_TOKENS = 8  # a 4-byte character split into single bytes, with room for a neighbour's bytes
_BROKEN = "\ufffd"  # what a decoder shows for incomplete UTF-8


@dataclass(frozen=True)
class TokenView:
    """One token as the model sees it, or consecutive tokens that together spell whole characters.

    `id` is the first token's id and `ids` all of them (one, unless a character is split);
    `mixed` says the grouped tokens were not all marked the same (see the module docstring).
    """

    id: int
    text: str
    trained: bool
    special: bool
    ids: tuple[int, ...] = ()
    mixed: bool = False


@dataclass
class SpanView:
    """One part of a preference row: the prompt, chosen, rejected or completion, after truncation."""

    name: str
    tokens: list[TokenView]
    kept: int  # tokens after truncation
    cut: int  # tokens truncation removed (from the left of a prompt, the right of an answer)


@dataclass
class InspectedExample:
    """One row after preprocessing: its tokens and what truncation removed.

    A preference row has no single sequence: its `tokens` are empty and its `spans` hold the
    prompt and each answer.
    """

    index: int  # 0-based position in the dataset
    row_number: int | None  # source line, when known
    length: int  # tokens before truncation
    kept: int  # tokens after truncation
    trained_tokens: int
    tokens: list[TokenView]
    label: str | None = None  # classification; "desirable" or "undesirable" for unpaired preference rows
    spans: list[SpanView] = field(default_factory=list)  # preference rows only

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
    per_class: int | None = None  # examples chosen as up to this many rows of each label
    preference: dict[str, Any] | None = None  # preference rows: `preference_tokens.preference_report`

    @property
    def short_classes(self) -> dict[str, int]:
        """Labels with fewer rows than `per_class` asked for, and how many they have (all shown)."""
        if self.per_class is None or self.label_distribution is None:
            return {}
        return {label: count for label, count in self.label_distribution.items() if count < self.per_class}

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
            "per_class": self.per_class,
            "short_classes": self.short_classes,
            "preference": self.preference,
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
    texts = [str(text) for text in tokenizer.batch_decode([[token] for token in ids], skip_special_tokens=False)]
    trained = [labels is not None and labels[i] != IGNORE_INDEX for i in range(len(ids))]
    views = []
    for start, end in _character_groups(tokenizer, ids, texts, special):
        text = texts[start] if end == start + 1 else str(tokenizer.decode(list(ids[start:end])))
        marks = trained[start:end]
        views.append(
            TokenView(
                int(ids[start]),
                text,
                2 * sum(marks) >= len(marks),  # the majority; a tie counts as trained
                ids[start] in special,
                tuple(int(token) for token in ids[start:end]),
                len(set(marks)) > 1,
            )
        )
    return views


def _per_class(rows: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """Indices of the first `count` rows of each label, labels sorted, rows in dataset order."""
    chosen: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        picked = chosen.setdefault(str(row["label"]), [])
        if len(picked) < count:
            picked.append(index)
    return [index for label in sorted(chosen) for index in chosen[label]]


def _character_groups(tokenizer: Any, ids: Sequence[int], texts: Sequence[str],
                      special: set[int]) -> list[tuple[int, int]]:
    """[start, end) runs of tokens to show together: one token, or those a split character spans.

    A token that decodes with a broken character starts a group that grows until the group
    decodes without one; when no such run exists within `MAX_SPLIT_TOKENS` (the text itself holds
    U+FFFD, or the row was cut inside a character), the token stays alone.
    """
    groups = []
    start = 0
    while start < len(ids):
        end = start + 1
        if _BROKEN in texts[start] and ids[start] not in special:
            limit = min(len(ids), start + MAX_SPLIT_TOKENS)
            for stop in range(start + 2, limit + 1):
                if ids[stop - 1] in special:
                    break
                if _BROKEN not in str(tokenizer.decode(list(ids[start:stop]))):
                    end = stop
                    break
        groups.append((start, end))
        start = end
    return groups


def inspect_examples(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    tokenizer: Any,
    *,
    max_length: int,
    n: int = 5,
    train_on_inputs: bool = False,
    row_numbers: Sequence[int] | None = None,
    per_class: int | None = None,
    truncation: str = "refuse",
    max_prompt_length: int | None = None,
) -> InspectionReport:
    """Preprocess every row as training does; show the first `n` and statistics over all.

    `per_class` (classification only) shows instead the first `per_class` rows of each label,
    labels in sorted order; a label with fewer rows shows all of them (`short_classes`).
    `truncation` "truncate_prompt" cuts prompts as training would; no mode drops a row here.
    `max_prompt_length` applies to preference rows only, as in their training.
    Raises ValueError for `per_class` below 1 or on rows of another kind.
    """
    if per_class is not None and per_class < 1:
        raise ValueError(f"per_class must be at least 1, not {per_class}")
    if per_class is not None and kind != "classification":
        raise ValueError(f"per_class picks rows by label, and rows of kind {kind} have none")
    if kind in ANSWER_FIELDS:
        return _inspect_preference(rows, kind, tokenizer, max_length=max_length, n=n,
                                   max_prompt_length=max_prompt_length, truncation=truncation,
                                   row_numbers=row_numbers)
    if kind == "classification":
        return _inspect_classification(rows, tokenizer, max_length=max_length, n=n, train_on_inputs=train_on_inputs,
                                       row_numbers=row_numbers, per_class=per_class)
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


def _inspect_classification(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    max_length: int,
    n: int,
    train_on_inputs: bool,
    row_numbers: Sequence[int] | None,
    per_class: int | None,
) -> InspectionReport:
    """`inspect_examples` for classification rows: the examples shown with their labels, and the labels' counts."""
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
        for i in (_per_class(rows, per_class) if per_class is not None else range(min(n, len(rows))))
    ]
    distribution = dict(sorted(Counter(str(r["label"]) for r in rows).items()))
    return InspectionReport(
        "classification",
        max_length,
        train_on_inputs,
        TEMPLATE_VERSION,
        None,
        examples,
        length_stats(report.lengths),
        report,
        distribution,
        per_class,
    )


def _preference_truncation(fitted: Sequence[FittedRow], max_length: int, truncation: str) -> TruncationReport:
    """The sft-shaped truncation summary of preference rows (a row's length: its prompt and longest answer)."""
    report = TruncationReport(max_length=max_length, total=len(fitted), truncation=truncation)
    for index, row in enumerate(fitted):
        cut = row.prompt_cut + sum(row.answer_cut(name) for name in row.answers)
        report.lengths.append(row.prompt_length + max(row.answer_lengths.values()))
        report.total_tokens += len(row.prompt) + sum(len(ids) for ids in row.answers.values())
        report.trainable_tokens += sum(len(ids) for ids in row.answers.values())
        if cut:
            report.truncated += 1
            report.truncated_rows.append(index)
        if row.prompt_cut:
            report.prompt_cut += 1
            report.prompt_tokens_cut += row.prompt_cut
        if row.empty_before:
            report.no_answer += 1
        elif row.empty:
            report.lost_all_answer += 1
        elif any(row.answer_cut(name) for name in row.answers):
            report.lost_part_of_answer += 1
        if row.empty:
            report.refused_rows.append(index)
    return report


def _inspect_preference(rows: Sequence[Mapping[str, Any]], kind: str, tokenizer: Any, *, max_length: int, n: int,
                        max_prompt_length: int | None, truncation: str,
                        row_numbers: Sequence[int] | None) -> InspectionReport:
    """Preference rows as their training renders and truncates them: prompt and answers as spans."""
    fitted = fit_rows(rows, tokenizer, kind=kind, max_length=max_length, max_prompt_length=max_prompt_length,
                      truncation=truncation)
    report = _preference_truncation(fitted, max_length, truncation)
    examples = []
    for i in range(min(n, len(rows))):
        row = fitted[i]
        spans = [SpanView("prompt", _token_views(tokenizer, row.prompt, None), len(row.prompt), row.prompt_cut)]
        spans += [SpanView(name, _token_views(tokenizer, ids, ids), len(ids), row.answer_cut(name))
                  for name, ids in row.answers.items()]
        label = None
        if kind == "unpaired_preference":
            label = "desirable" if rows[i]["label"] else "undesirable"
        examples.append(InspectedExample(
            i, row_numbers[i] if row_numbers else None, report.lengths[i],
            len(row.prompt) + max(len(ids) for ids in row.answers.values()),
            sum(len(ids) for ids in row.answers.values()), [], label=label, spans=spans,
        ))  # fmt: skip
    summary = preference_report(fitted, kind=kind, max_length=max_length, max_prompt_length=max_prompt_length,
                                truncation=truncation)
    return InspectionReport(kind, max_length, False, TEMPLATE_VERSION, None, examples, length_stats(report.lengths),
                            report, preference=summary)
