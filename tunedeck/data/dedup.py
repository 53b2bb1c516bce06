"""Exact and near-duplicate rows within train and across train/validation/test.

Exact duplicates share the hash of their normalised text (Unicode NFKC,
case-folded, whitespace collapsed). Near duplicates are found with MinHash LSH
over character 5-grams of that text, then confirmed by the MinHash estimate of
their Jaccard similarity reaching the threshold (default 0.8). Character
n-grams rather than word n-grams, because one changed word in a short sentence
already drops word-trigram similarity far below 0.8.

What is compared is the row's content, not its scaffolding: system messages and
the Alpaca template preamble are the same in every row, and would make all
short rows look alike.

A pair whose rows sit in different splits is contamination: evaluation data
the model may have trained on.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.formats.instruction import ALPACA_PREAMBLE, ALPACA_PREAMBLE_WITH_INPUT
from tunedeck.data.formats.preference import is_preference_row
from tunedeck.data.formats.row_text import searchable_text
from tunedeck.data.loading import LoadedDataset
from tunedeck.data.manifest import content_sha256

if TYPE_CHECKING:
    from datasketch import MinHashLSH

DEFAULT_THRESHOLD = 0.8
NUM_PERM = 128
SHINGLE_CHARS = 5
MINHASH_SEED = 1
LSH_MAX_THRESHOLD = 0.9
_WHITESPACE = re.compile(r"\s+")
_TEMPLATE_HEADERS = re.compile(r"### (?:Instruction|Input|Response):\n")


def dedup_text(row: Mapping[str, Any]) -> str:
    """The content of a canonical row that duplicates are judged on."""
    if is_preference_row(row):
        return searchable_text(row, system=False)
    if "messages" in row:
        return "\n".join(str(m.get("content") or "") for m in row["messages"] if m.get("role") != "system")
    if "prompt" in row:
        prompt = str(row["prompt"])
        for preamble in (ALPACA_PREAMBLE_WITH_INPUT, ALPACA_PREAMBLE):
            if prompt.startswith(preamble):
                prompt = _TEMPLATE_HEADERS.sub("", prompt[len(preamble) :])
                break
        return f"{prompt}\n{row['completion']}"
    return searchable_text(row)


def normalise_text(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form exact duplicates are hashed in."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def shingles(normalised: str) -> set[bytes]:
    """Character 5-grams of a normalised text (the whole text when shorter)."""
    data = normalised.encode("utf-8")
    if len(normalised) <= SHINGLE_CHARS:
        return {data}
    return {
        normalised[i : i + SHINGLE_CHARS].encode("utf-8") for i in range(len(normalised) - SHINGLE_CHARS + 1)
    }


@dataclass(frozen=True)
class DuplicatePair:
    """Two rows judged the same: where each is (split and source line) and how similar they are."""

    match: Literal["exact", "near"]
    first_split: str
    first_row: int
    second_split: str
    second_row: int
    similarity: float

    @property
    def contamination(self) -> bool:
        """True when the rows are in different splits."""
        return self.first_split != self.second_split

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "match": self.match,
            "first": {"split": self.first_split, "row": self.first_row},
            "second": {"split": self.second_split, "row": self.second_row},
            "similarity": round(self.similarity, 4),
            "contamination": self.contamination,
        }


@dataclass
class DedupReport:
    """Every duplicate pair found, and which train rows (0-based indices) dropping would remove."""

    threshold: float
    rows: dict[str, int]
    pairs: list[DuplicatePair] = field(default_factory=list)
    train_drop: list[int] = field(default_factory=list)
    train_split: str = "train"

    @property
    def contamination(self) -> list[DuplicatePair]:
        """Pairs across splits."""
        return [pair for pair in self.pairs if pair.contamination]

    def counts(self) -> dict[str, int]:
        """Pair counts by kind, for summaries."""
        within = [p for p in self.pairs if not p.contamination]
        return {
            "exact_within": sum(p.match == "exact" for p in within),
            "near_within": sum(p.match == "near" for p in within),
            "exact_across": sum(p.match == "exact" for p in self.contamination),
            "near_across": sum(p.match == "near" for p in self.contamination),
            "train_rows_to_drop": len(self.train_drop),
        }

    def contamination_record(self) -> dict[str, Any]:
        """What a run records about overlap between its training and evaluation data."""
        by_split: dict[str, int] = {}
        for pair in self.contamination:
            other = pair.second_split if pair.first_split == self.train_split else pair.first_split
            by_split[other] = by_split.get(other, 0) + 1
        return {
            "contaminated": bool(by_split),
            "pairs_by_split": by_split,
            "threshold": self.threshold,
            "pairs": [p.to_dict() for p in self.contamination[:100]],
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for `--json` output."""
        return {
            "threshold": self.threshold,
            "rows": self.rows,
            "counts": self.counts(),
            "pairs": [p.to_dict() for p in self.pairs],
            "contamination": self.contamination_record(),
        }


def find_duplicates(
    splits: Mapping[str, LoadedDataset],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = NUM_PERM,
    train_split: str = "train",
    on_progress: Callable[[int], None] | None = None,
) -> DedupReport:
    """Find exact and near-duplicate pairs within `train_split` and across all splits.

    Rows are referred to by their source line. Pairs inside the same non-train
    split are not reported: they cannot leak into training. `on_progress` gets the
    number of rows done (all splits together) every 1,000 rows and at the end.
    """
    from datasketch import MinHashLSH  # imported here: only dedup needs it

    if not 0.0 < threshold <= 1.0:
        raise DataError(
            [
                Issue(
                    "invalid threshold",
                    field="threshold",
                    expected="a Jaccard value in (0, 1]",
                    found=str(threshold),
                )
            ]
        )
    order = sorted(splits, key=lambda name: name != train_split)  # train first, so it is the pair's first row
    report = DedupReport(
        threshold=threshold, rows={n: len(splits[n].rows) for n in order}, train_split=train_split
    )
    # LSH only proposes candidates, confirmed below against the real threshold; above 0.9 it
    # cannot build two bands from 128 permutations, and a lower candidate threshold only adds checks.
    lsh = MinHashLSH(threshold=min(threshold, LSH_MAX_THRESHOLD), num_perm=num_perm)
    pairs = _PairCollector(splits, train_split, report)
    texts: list[str] = []
    for name in order:
        for index, row in enumerate(splits[name].rows):
            pairs.refs.append((name, index))
            texts.append(normalise_text(dedup_text(row)))
    representatives = _exact_pairs(texts, pairs)
    _near_pairs(texts, representatives, pairs, lsh, threshold=threshold, num_perm=num_perm, on_progress=on_progress)
    report.train_drop = sorted(pairs.drop)
    if on_progress is not None:
        on_progress(len(texts))
    return report


@dataclass
class _PairCollector:
    """Adds duplicate pairs to the report, by global row index, and collects the train rows to drop."""

    splits: Mapping[str, LoadedDataset]
    train_split: str
    report: DedupReport
    refs: list[tuple[str, int]] = field(default_factory=list)  # global index -> (split, index in split)
    drop: set[int] = field(default_factory=set)

    def add(self, match: Literal["exact", "near"], a: int, b: int, similarity: float) -> None:
        """Report rows `a` and `b` as a pair (unless both sit in the same evaluation split)."""
        splits, train_split = self.splits, self.train_split
        (split_a, i), (split_b, j) = self.refs[a], self.refs[b]
        if split_a == split_b and split_a != train_split:
            return
        self.report.pairs.append(
            DuplicatePair(
                match,
                split_a,
                splits[split_a].line_numbers[i],
                split_b,
                splits[split_b].line_numbers[j],
                similarity,
            )
        )
        # Keep the first copy inside train; any train copy of evaluation data goes.
        if split_b == train_split:
            self.drop.add(j)
        elif split_a == train_split and split_b != train_split:
            self.drop.add(i)


def _exact_pairs(texts: list[str], pairs: _PairCollector) -> list[int]:
    """Pair each text with the first identical one; returns the positions of the first copies."""
    first_of_key: dict[bytes, int] = {}
    representatives: list[int] = []
    for position, text in enumerate(texts):
        key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        if key in first_of_key:
            pairs.add("exact", first_of_key[key], position, 1.0)
        else:
            first_of_key[key] = position
            representatives.append(position)
    return representatives


def _near_pairs(
    texts: list[str],
    representatives: list[int],
    pairs: _PairCollector,
    lsh: MinHashLSH,
    *,
    threshold: float,
    num_perm: int,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Pair each first copy with the earlier ones whose MinHash similarity reaches `threshold`."""
    from datasketch import MinHash

    signatures: dict[int, Any] = {}
    minhashes = MinHash.generator(
        (shingles(texts[p]) for p in representatives), num_perm=num_perm, seed=MINHASH_SEED
    )
    for done, (position, minhash) in enumerate(zip(representatives, minhashes, strict=True), start=1):
        # MinHash and LSH are where the time goes; exact duplicates cost nothing, so count them as done.
        if on_progress is not None and done % 1000 == 0:
            on_progress(position + 1)
        for candidate in sorted(lsh.query(minhash)):
            similarity = float((signatures[candidate] == minhash.hashvalues).mean())
            if similarity >= threshold:
                pairs.add("near", candidate, position, similarity)
        lsh.insert(position, minhash, check_duplication=False)
        signatures[position] = minhash.hashvalues


def drop_from_train(train: LoadedDataset, report: DedupReport) -> LoadedDataset:
    """A copy of `train` without the rows the report marks for dropping, with a fresh manifest."""
    doomed = set(report.train_drop)
    keep = [i for i in range(len(train.rows)) if i not in doomed]
    rows = [train.rows[i] for i in keep]
    manifest = replace(
        train.manifest,
        sha256=content_sha256(rows),
        rows=len(rows),
        parent=train.manifest.sha256,
        id=None,
        version=None,
        notes={
            **train.manifest.notes,
            "dedup_dropped_lines": [train.line_numbers[i] for i in sorted(doomed)],
        },
    )
    return replace(train, rows=rows, line_numbers=[train.line_numbers[i] for i in keep], manifest=manifest)
