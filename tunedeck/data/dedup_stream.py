"""Exact and near duplicates of one stream of rows, in memory that grows by tens of bytes per row.

`find_duplicates` (in `dedup`) keeps every row, every MinHash object and an
in-memory LSH index: about a kilobyte per row, which is what an upload of
millions of short rows cannot afford. This finder judges rows by the same rules
(the same text, 5-gram shingles, MinHash permutations and seed, the same
threshold and LSH bands), but keeps the large parts on disk:

- each row's 16-byte exact key and source line stay in memory (24 bytes a row);
- its MinHash signature (num_perm 32-bit values) and its LSH band keys are
  appended to files in a scratch folder;
- at the end, exact duplicates come from sorting the keys, and near-duplicate
  candidates from sorting one band's keys at a time (rows that share a band key
  share an LSH bucket); each candidate pair is confirmed against the signatures
  read back through a memory map, chunk by chunk.

A pair is counted once, in the first band where its rows collide. The report has
the same shape as `DedupReport.to_dict()` for one split, with the first
`max_pairs` pairs in row order and every count exact.
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tunedeck.data.dedup import (
    DEFAULT_THRESHOLD,
    LSH_MAX_THRESHOLD,
    MINHASH_SEED,
    NUM_PERM,
    DuplicatePair,
    dedup_text,
    normalise_text,
    shingles,
)

BATCH_ROWS = 2048
PAIR_CHUNK = 16_384  # candidate pairs confirmed per numpy step: 2 x 16k signatures of 512 bytes
SPLIT = "train"
# Odd 64-bit multipliers that fold a band's MinHash values into one key (collisions are harmless:
# every candidate is confirmed against its signatures).
_BAND_MIXERS = np.random.default_rng(20261204).integers(1, 2**63, size=NUM_PERM, dtype=np.uint64) | np.uint64(1)


class StreamingDuplicateFinder:
    """Feed rows with `add`, then call `report` once; scratch files live in `folder` (the caller removes it)."""

    def __init__(self, folder: Path, *, threshold: float = DEFAULT_THRESHOLD, num_perm: int = NUM_PERM) -> None:
        from datasketch import MinHashLSH  # imported here: only deduplication needs it

        folder.mkdir(parents=True, exist_ok=True)
        self.threshold = threshold
        self.num_perm = num_perm
        # The same bands the in-memory index would use for this threshold (see `find_duplicates`).
        lsh = MinHashLSH(threshold=min(threshold, LSH_MAX_THRESHOLD), num_perm=num_perm)
        self.bands, self.band_rows = int(lsh.b), int(lsh.r)
        self._signature_path = folder / "signatures.u32"
        self._band_paths = [folder / f"band-{band}.u64" for band in range(self.bands)]
        self._signatures = open(self._signature_path, "wb")  # noqa: SIM115 - closed in close()
        self._band_files = [open(path, "wb") for path in self._band_paths]  # noqa: SIM115
        self._keys = bytearray()
        self._lines = array("q")
        self._pending: list[set[bytes]] = []
        self.rows = 0

    def add(self, row: Mapping[str, Any], line: int) -> None:
        """Take one canonical row and its source line."""
        text = normalise_text(dedup_text(row))
        self._keys += hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        self._lines.append(line)
        self._pending.append(shingles(text))
        self.rows += 1
        if len(self._pending) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        from datasketch import MinHash

        if not self._pending:
            return
        signatures = np.stack(
            [m.hashvalues for m in MinHash.generator(self._pending, num_perm=self.num_perm, seed=MINHASH_SEED)]
        ).astype(np.uint32)
        self._pending = []
        self._signatures.write(signatures.tobytes())
        wide = signatures.astype(np.uint64)
        for band, handle in enumerate(self._band_files):
            start = band * self.band_rows
            part = wide[:, start : start + self.band_rows]
            handle.write((part * _BAND_MIXERS[: self.band_rows]).sum(axis=1, dtype=np.uint64).tobytes())

    def close(self) -> None:
        """Close the scratch files (idempotent; `report` does it, a refused upload's caller too)."""
        for handle in (self._signatures, *self._band_files):
            handle.close()

    def report(self, max_pairs: int) -> dict[str, Any]:
        """Every duplicate pair counted; the first `max_pairs` (by second row, then first) listed."""
        self._flush()
        self.close()
        tally = _Tally(max_pairs, np.frombuffer(self._lines, dtype=np.int64) if self.rows else np.zeros(0, np.int64))
        representative = self._exact_pairs(tally)
        if self.rows:
            signatures = np.memmap(self._signature_path, dtype=np.uint32, mode="r", shape=(self.rows, self.num_perm))
            self._near_pairs(tally, representative, signatures)
        return tally.to_dict(self.threshold, self.rows)

    def _exact_pairs(self, tally: _Tally) -> np.ndarray:
        """Record exact pairs (each later copy against the first); True where a row is the first of its text."""
        keys = np.frombuffer(bytes(self._keys), dtype=np.uint64).reshape(-1, 2)
        self._keys = bytearray()
        representative = np.ones(self.rows, dtype=bool)
        if self.rows < 2:
            return representative
        order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: equal keys stay in row order
        ordered = keys[order]
        same = np.all(ordered[1:] == ordered[:-1], axis=1)
        run_start = np.maximum.accumulate(np.where(np.concatenate(([False], same)), 0, np.arange(self.rows)))
        copies = np.flatnonzero(np.concatenate(([False], same)))
        firsts, seconds = order[run_start[copies]], order[copies]
        representative[seconds] = False
        tally.add("exact", firsts, seconds, np.ones(len(seconds)))
        return representative

    def _near_pairs(self, tally: _Tally, representative: np.ndarray, signatures: np.ndarray) -> None:
        """Confirm candidates band by band; exact copies are left out, as in the in-memory finder."""
        rows = np.flatnonzero(representative)
        earlier_bands: list[np.ndarray] = []
        for path in self._band_paths:
            band_keys = np.fromfile(path, dtype=np.uint64)[rows]
            order = np.argsort(band_keys, kind="stable")
            ordered = band_keys[order]
            boundaries = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
            for start, stop in zip(
                np.concatenate(([0], boundaries)), np.concatenate((boundaries, [len(rows)])), strict=True
            ):
                if stop - start > 1:
                    members = rows[order[start:stop]]  # ascending: the sort was stable over ascending rows
                    self._confirm_bucket(tally, members, signatures, earlier_bands, rows)
            earlier_bands.append(band_keys)

    def _confirm_bucket(
        self,
        tally: _Tally,
        members: np.ndarray,
        signatures: np.ndarray,
        earlier_bands: list[np.ndarray],
        rows: np.ndarray,
    ) -> None:
        first_index, second_index = np.triu_indices(len(members), k=1)
        for chunk in range(0, len(first_index), PAIR_CHUNK):
            firsts = members[first_index[chunk : chunk + PAIR_CHUNK]]
            seconds = members[second_index[chunk : chunk + PAIR_CHUNK]]
            if earlier_bands:
                # Counted already where an earlier band put both rows in one bucket.
                where_a, where_b = np.searchsorted(rows, firsts), np.searchsorted(rows, seconds)
                seen = np.zeros(len(firsts), dtype=bool)
                for keys in earlier_bands:
                    seen |= keys[where_a] == keys[where_b]
                firsts, seconds = firsts[~seen], seconds[~seen]
            if not len(firsts):
                continue
            similarity = (signatures[firsts] == signatures[seconds]).mean(axis=1)
            confirmed = similarity >= self.threshold
            tally.add("near", firsts[confirmed], seconds[confirmed], similarity[confirmed])


class _Tally:
    """Pair counts, the rows a deduplication would drop, and the first pairs to show."""

    def __init__(self, max_pairs: int, lines: np.ndarray) -> None:
        self.max_pairs = max_pairs
        self.lines = lines
        self.counts = {"exact": 0, "near": 0}
        self.dropped = np.zeros(len(lines), dtype=bool)
        # A max-heap (negated keys) of the smallest (second, first) pairs seen.
        self._shown: list[tuple[int, int, str, float]] = []

    def add(
        self, match: Literal["exact", "near"], firsts: np.ndarray, seconds: np.ndarray, similarity: np.ndarray
    ) -> None:
        self.counts[match] += len(firsts)
        self.dropped[seconds] = True
        if self.max_pairs <= 0:
            return
        pick = np.lexsort((firsts, seconds))[: self.max_pairs]
        for first, second, value in zip(firsts[pick], seconds[pick], similarity[pick], strict=True):
            entry = (-int(second), -int(first), match, float(value))
            if len(self._shown) < self.max_pairs:
                heapq.heappush(self._shown, entry)
            elif entry > self._shown[0]:
                heapq.heapreplace(self._shown, entry)

    def to_dict(self, threshold: float, rows: int) -> dict[str, Any]:
        shown = sorted(self._shown, reverse=True)
        pairs = [
            DuplicatePair(match, SPLIT, int(self.lines[-first]), SPLIT, int(self.lines[-second]), value).to_dict()  # type: ignore[arg-type]
            for second, first, match, value in shown
        ]
        return {
            "threshold": threshold,
            "rows": {SPLIT: rows},
            "counts": {
                "exact_within": self.counts["exact"],
                "near_within": self.counts["near"],
                "exact_across": 0,
                "near_across": 0,
                "train_rows_to_drop": int(self.dropped.sum()),
            },
            "pairs": pairs,
            "pairs_shown": len(pairs),
            "contamination": {"contaminated": False, "pairs_by_split": {}, "threshold": threshold, "pairs": []},
        }
