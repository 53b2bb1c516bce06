"""Splitting keeps exact and near duplicates in one split, and reports the groups it kept together."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tunedeck.cli.main import app
from tunedeck.data.dedup import find_duplicates
from tunedeck.data.loading import load_dataset
from tunedeck.data.split import plan_split, split_dataset, write_split

LONG = "the harbour master counted forty two fishing boats returning before the storm reached the northern pier"


def _unique(count: int) -> list[str]:
    """Sentences of random letters: no two share enough 5-grams to be near duplicates."""
    draw = random.Random(3)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    return [" ".join("".join(draw.choices(alphabet, k=6)) for _ in range(8)) for _ in range(count)]


def _rows() -> tuple[list[dict[str, Any]], list[list[str]]]:
    """40 distinct rows plus three duplicate groups: exact (case, spacing), near (one letter), and an exact pair
    near the second group."""
    groups = [
        ["Bees dance to show where flowers are.", "bees dance to show  where FLOWERS are.", "BEES DANCE TO SHOW"
         " WHERE FLOWERS ARE."],
        [LONG, LONG.replace("forty", "fortx"), LONG.replace("storm", "sturm")],
        [LONG.upper().replace("HARBOUR", "HARBOR") + " today", LONG.replace("harbour", "harbor") + " today"],
    ]  # fmt: skip
    texts = _unique(40)
    draw = random.Random(5)
    for group in groups:
        for text in group:
            texts.insert(draw.randrange(len(texts) + 1), text)
    return [{"text": text} for text in texts], groups


def test_no_duplicate_group_spans_two_splits_and_the_report_counts_them(tmp_path: Path) -> None:
    rows, groups = _rows()
    loaded = load_dataset(write_jsonl(tmp_path / "all.jsonl", rows), name="corpus")
    for seed in range(6):
        parts = split_dataset(loaded, (0.6, 0.2, 0.2), seed=seed, seal_test=True)
        manifest = write_split(parts, tmp_path / f"out-{seed}")
        assert sum(len(part.rows) for part in parts.values()) == len(rows)
        # Evaluation splits never grow past their share.
        assert len(parts["validation"].rows) <= round(len(rows) * 0.2) >= len(parts["test"].rows)
        where = {row["text"]: split for split, part in parts.items() for row in part.rows}
        for group in groups[:2]:
            assert len({where[text] for text in group}) == 1, (seed, group)
        # The last group links to the second through a near duplicate: one cluster of five rows.
        assert len({where[text] for text in groups[1] + groups[2]}) == 1
        overlap = find_duplicates({name: load_dataset(tmp_path / f"out-{seed}" / f"{name}.jsonl") for name in parts})
        assert overlap.contamination == []
        dedup = manifest["dedup"]
        assert (dedup["clusters"], dedup["rows_in_clusters"]) == (2, 8)
        assert dedup["exact_pairs"] == 3 and dedup["near_pairs"] == 3  # 2 + 1 exact copies; near ones linking the rest
        # Kept together: clusters a row-by-row cut of the same seed would have spread over two splits.
        naive = plan_split(len(rows), (0.6, 0.2, 0.2), seed)
        split_of = {i: split for split, indices in naive.items() for i in indices}
        index = {row["text"]: i for i, row in enumerate(rows)}
        clusters = [groups[0], groups[1] + groups[2]]
        spread = sum(len({split_of[index[text]] for text in cluster}) > 1 for cluster in clusters)
        assert dedup["clusters_kept_together"] == spread
        assert parts["test"].manifest.notes["dedup"] == dedup


def test_rows_without_duplicates_split_as_before() -> None:
    plan = plan_split(30, (0.8, 0.1, 0.1), seed=9)
    assert plan == plan_split(30, (0.8, 0.1, 0.1), seed=9, clusters=[])
    grouped = plan_split(30, (0.8, 0.1, 0.1), seed=9, clusters=[[0, 1, 2, 3]])
    assert sum(set(range(4)) <= set(indices) for indices in grouped.values()) == 1


def test_split_command_reports_the_groups(tmp_path: Path) -> None:
    rows, _ = _rows()
    source = write_jsonl(tmp_path / "all.jsonl", rows)
    out = tmp_path / "out"
    shown = CliRunner().invoke(app, ["data", "split", str(source), "--out", str(out), "--seal-test"])
    assert shown.exit_code == 0, shown.output
    assert "grouped into 2 cluster(s) of 8 rows" in shown.stdout
    written = json.loads((out / "split_manifest.json").read_text(encoding="utf-8"))
    assert written["dedup"]["clusters"] == 2 and written["splits"]["test"]["sealed"]
    as_json = CliRunner().invoke(app, ["data", "split", str(source), "--out", str(out), "--json"])
    assert json.loads(as_json.stdout)["dedup"]["rows_in_clusters"] == 8
    bad = CliRunner().invoke(app, ["data", "split", str(source), "--out", str(out), "--threshold", "2"])
    assert bad.exit_code == 1 and "threshold" in bad.stderr
