"""Bin-packing of tokenized examples into rows of at most `max_length` tokens (no torch here).

Best-fit decreasing: examples are placed longest first, each into the fullest pack that still
has room, so packs come out dense. An example is never split; each pack records where its
examples start and end, and `packed_features` turns packs into the training rows the packed
collator (`tunedeck.engine.speedups.packed_attention`) reads: concatenated ids and labels, and position
ids that restart at 0 for each example, which is what marks the boundaries.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.ragged import RaggedRows, row_lengths
from tunedeck.data.tokenize import IGNORE_INDEX, TokenizedRows


@dataclass(frozen=True)
class Pack:
    """Examples sharing one training row: their indices, in order, and their lengths."""

    indices: tuple[int, ...]
    lengths: tuple[int, ...]

    @property
    def total(self) -> int:
        """Tokens in the pack."""
        return sum(self.lengths)

    @property
    def boundaries(self) -> list[tuple[int, int]]:
        """`(start, end)` token offsets of each example inside the pack."""
        spans, start = [], 0
        for length in self.lengths:
            spans.append((start, start + length))
            start += length
        return spans


def _lengths_of(tokenized: TokenizedRows | Sequence[Sequence[int]] | Sequence[int]) -> list[int]:
    if isinstance(tokenized, TokenizedRows):
        return row_lengths(tokenized.input_ids)
    if isinstance(tokenized, RaggedRows):
        return tokenized.lengths()
    items = list(tokenized)
    if items and isinstance(items[0], int):
        return [int(n) for n in items]  # type: ignore[call-overload]
    return [len(row) for row in items]  # type: ignore[arg-type]


def pack_examples(
    tokenized: TokenizedRows | Sequence[Sequence[int]] | Sequence[int], max_length: int
) -> list[Pack]:
    """Pack examples (tokenized rows, id lists, or plain lengths) into rows of ≤ `max_length` tokens.

    Deterministic for the same lengths. An example longer than `max_length` is a DataError:
    truncate first (`tokenize_rows` does). Empty examples are skipped.
    """
    if max_length < 1:
        raise ValueError("max_length must be positive")
    lengths = _lengths_of(tokenized)
    too_long = [i for i, n in enumerate(lengths) if n > max_length]
    if too_long:
        raise DataError(
            [
                Issue(
                    f"row {i + 1} has {lengths[i]} tokens",
                    found=f"{lengths[i]} tokens",
                    expected=f"at most {max_length} tokens per example",
                )
                for i in too_long[:20]
            ],
            title="examples longer than the pack length (truncate before packing)",
        )
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (-lengths[i], i))
    members: list[list[int]] = []
    # Sorted (free space, pack id): the first entry with enough room is the best fit.
    free: list[tuple[int, int]] = []
    for index in order:
        need = lengths[index]
        slot = bisect.bisect_left(free, (need, -1))
        if slot == len(free):
            pack_id = len(members)
            members.append([index])
            room = max_length - need
        else:
            room_before, pack_id = free.pop(slot)
            members[pack_id].append(index)
            room = room_before - need
        if room > 0:
            bisect.insort(free, (room, pack_id))
    packs = []
    for indices in members:
        ordered = tuple(sorted(indices))
        packs.append(Pack(ordered, tuple(lengths[i] for i in ordered)))
    return packs


def packing_efficiency(packs: Sequence[Pack], max_length: int) -> float:
    """Share of the pack rows filled with tokens (1.0 = no padding would be needed)."""
    return sum(p.total for p in packs) / (len(packs) * max_length) if packs else 0.0


def packed_features(tokenized: TokenizedRows, packs: Sequence[Pack]) -> list[dict[str, Any]]:
    """One training row per pack: `input_ids`, `labels`, `position_ids` (restarting per example).

    The first label of every example is ignored so that no token predicts across a boundary.
    """
    return [
        packed_row([(tokenized.input_ids[i], tokenized.labels[i]) for i in pack.indices]) for pack in packs
    ]


def pack_feature_rows(features: Sequence[dict[str, Any]], max_length: int) -> list[dict[str, Any]]:
    """Pack already-tokenized examples (`input_ids`, `labels` each) into rows of ≤ `max_length` tokens.

    What packing one micro-batch needs: the same examples, fewer and denser rows.
    """
    packs = pack_examples([len(feature["input_ids"]) for feature in features], max_length)
    return [
        packed_row([(features[i]["input_ids"], features[i]["labels"]) for i in pack.indices]) for pack in packs
    ]


def packed_row(examples: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, Any]:
    """Concatenate `(input_ids, labels)` examples into one row whose position ids restart per example.

    Each example's first label becomes ignored: in a packed row it would be predicted from the
    previous example's last token. Alone it is never predicted (the loss shifts labels by one),
    so this changes nothing against unpacked training.
    """
    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []
    for example_ids, example_labels in examples:
        ids.extend(example_ids)
        labels.append(IGNORE_INDEX)
        labels.extend(example_labels[1:])
        positions.extend(range(len(example_ids)))
    return {"input_ids": ids, "labels": labels, "position_ids": positions}
