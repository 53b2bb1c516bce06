"""Whether a sealed test set repeats rows a job trained or validated on, checked before the test set is scored.

A test row the model saw in training (or that chose its checkpoint, in validation)
measures memory, not generalisation. `check_test_contamination` compares the test rows
with the job's training and validation rows by the rules of `tunedeck.data.dedup`
(exact after normalisation, near by MinHash over character 5-grams) and names the test
rows that repeat one. `require_clean_test_set` refuses a contaminated test set, or,
when contamination is explicitly allowed, returns the warning to record with the result.
Every sealed-test evaluation goes through these two functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.data.dedup import DEFAULT_THRESHOLD, find_duplicates
from tunedeck.data.loading import LoadedDataset

TEST_SPLIT = "test"
ROWS_NAMED = 5  # test rows listed in a message; the result lists them all


@dataclass(frozen=True)
class ContaminationCheck:
    """The test rows (source line numbers) that repeat a training or validation row, by the split they repeat."""

    threshold: float
    test_rows: int
    rows: list[int] = field(default_factory=list)
    pairs_by_split: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> {"exact": n, "near": n}
    unchecked: list[str] = field(default_factory=list)  # why a split could not be compared

    @property
    def contaminated(self) -> bool:
        """Whether any test row repeats a training or validation row."""
        return bool(self.rows)

    def summary(self) -> str:
        """One sentence: how many test rows repeat which data, and the first row numbers."""
        shown = ", ".join(str(row) for row in self.rows[:ROWS_NAMED]) + (", ..." if len(self.rows) > ROWS_NAMED else "")
        kinds = "; ".join(
            f"{split}: {counts.get('exact', 0)} exact, {counts.get('near', 0)} near"
            for split, counts in self.pairs_by_split.items()
        )
        return (
            f"{len(self.rows)} of {self.test_rows} test rows repeat rows the job trained or validated on "
            f"({kinds}; similarity threshold {self.threshold}); test rows {shown}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, recorded with the test result."""
        return {
            "contaminated": self.contaminated,
            "threshold": self.threshold,
            "test_rows": self.test_rows,
            "contaminated_rows": len(self.rows),
            "rows": self.rows,
            "pairs_by_split": self.pairs_by_split,
            "unchecked": self.unchecked,
        }


def check_test_contamination(
    test: LoadedDataset,
    seen: Mapping[str, LoadedDataset],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    unchecked: list[str] | None = None,
) -> ContaminationCheck:
    """Compare `test` with the data the job has seen (`seen`: split name -> rows, e.g. train, validation).

    `unchecked` carries the reasons a split the job used could not be read; they are
    recorded, not guessed at.
    """
    if TEST_SPLIT in seen:
        raise ValueError(f"the data the job saw cannot be named {TEST_SPLIT!r}")
    # The test set as the "train" split of the finder: every pair with a test row on one side is reported.
    report = find_duplicates({TEST_SPLIT: test, **seen}, threshold=threshold, train_split=TEST_SPLIT)
    rows: set[int] = set()
    by_split: dict[str, dict[str, int]] = {}
    for pair in report.pairs:
        if (pair.first_split == TEST_SPLIT) == (pair.second_split == TEST_SPLIT):
            continue  # inside the test set, or between the job's own splits
        test_row = pair.first_row if pair.first_split == TEST_SPLIT else pair.second_row
        other = pair.second_split if pair.first_split == TEST_SPLIT else pair.first_split
        rows.add(test_row)
        counts = by_split.setdefault(other, {"exact": 0, "near": 0})
        counts[pair.match] += 1
    return ContaminationCheck(
        threshold=threshold,
        test_rows=len(test.rows),
        rows=sorted(rows),
        pairs_by_split=by_split,
        unchecked=list(unchecked or []),
    )


def require_clean_test_set(check: ContaminationCheck, *, allow_contamination: bool) -> str | None:
    """Refuse a contaminated test set (ConfigError naming the rows); with `allow_contamination`, the warning instead.

    None when the test set is clean and every split could be compared.
    """
    warnings = [f"not compared with {reason}" for reason in check.unchecked]
    if check.contaminated:
        if not allow_contamination:
            raise ConfigError(
                [
                    Issue(
                        check.summary(),
                        field="--dataset",
                        expected="no row shared with the job's training or validation data; "
                        "--allow-contamination scores it anyway and records the warning",
                    )
                ],
                title="the sealed test set is contaminated",
            )
        warnings.insert(0, f"contaminated test set, scored anyway: {check.summary()}")
    return "; ".join(warnings) or None
