"""Rows of token ids of varying length, stored flat in numpy arrays instead of Python lists.

A tokenized dataset as Python lists costs a pointer and often an int object per token; a
200,000-row dataset of 512 tokens would take gigabytes. `RaggedRows` keeps one flat int32
array and the row offsets (memory-mapped when read from the cache), and builds a row's list
only when it is asked for, so reading a cached dataset costs almost nothing up front.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np


class RaggedRows(Sequence[list[int]]):
    """A read-only sequence of int rows backed by `flat` values and `offsets` (len(rows) + 1)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        if offsets.ndim != 1 or len(offsets) == 0 or int(offsets[-1]) != len(flat):
            raise ValueError("offsets must be 1-D, start the rows and end at len(flat)")
        self.flat = flat
        self.offsets = offsets

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]], dtype: Any = np.int32) -> RaggedRows:
        """Flatten Python rows (one C-level pass over the values)."""
        if isinstance(rows, RaggedRows):
            return rows
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(row) for row in rows], out=offsets[1:])
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(offsets[-1]))
        return cls(flat, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("row index out of range")
        return self.flat[int(self.offsets[index]) : int(self.offsets[index + 1])].tolist()  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[list[int]]:
        for index in range(len(self)):
            yield self[index]

    def lengths(self) -> list[int]:
        """Length of every row, without building the rows."""
        return np.diff(self.offsets).tolist()  # type: ignore[no-any-return]

    def to_lists(self) -> list[list[int]]:
        """Every row as a Python list."""
        values = self.flat.tolist()
        bounds = self.offsets.tolist()
        return [values[bounds[i] : bounds[i + 1]] for i in range(len(self))]


def row_lengths(rows: Sequence[Sequence[int]]) -> list[int]:
    """Row lengths of lists or of `RaggedRows` (cheaply for the latter)."""
    if isinstance(rows, RaggedRows):
        return rows.lengths()
    return [len(row) for row in rows]
