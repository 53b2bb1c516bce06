"""Exact and near duplicates are found within train and across splits, unrelated rows are not."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.data import write_jsonl
from tunedeck.data.dedup import drop_from_train, find_duplicates
from tunedeck.data.loading import load_dataset

SENTENCES = [
    "The river rose overnight and covered the lower fields with brown water.",
    "A good bread needs flour, water, salt and a great deal of patience.",
    "Lighthouses guided merchant ships along the rocky northern coast.",
    "The committee postponed its vote on the budget until the spring meeting.",
    "Honey bees communicate the location of flowers by dancing in the hive.",
    "Cold brew coffee steeps for twelve hours in the fridge before serving.",
    "Our neighbour repaired the old clock tower using parts from a bicycle.",
    "Glaciers carve deep valleys as they creep slowly down the mountains.",
    "She practised the violin every morning before the market opened.",
    "The library extended its opening hours during the examination period.",
    "Volcanic soil is unusually fertile, which is why vineyards thrive there.",
    "A sudden hailstorm flattened the wheat two days before the harvest.",
]
NEAR_OF_4 = "Honey bees communicate the location of flowers by dancing inside the hive."


def _load(tmp_path: Path, name: str, texts: list[str]):  # type: ignore[no-untyped-def]
    return load_dataset(write_jsonl(tmp_path / f"{name}.jsonl", [{"text": t} for t in texts]))


def test_planted_duplicates_are_found_and_nothing_else(tmp_path: Path) -> None:
    train_texts = [
        *SENTENCES[:9],
        "  the RIVER rose overnight and covered the lower fields with brown   water. ",
    ]
    train = _load(tmp_path, "train", train_texts)  # line 10 = exact dup of line 1
    validation = _load(tmp_path, "validation", [SENTENCES[9], SENTENCES[2]])  # line 2 = exact dup of train 3
    test = _load(tmp_path, "test", [SENTENCES[10], NEAR_OF_4, SENTENCES[11]])  # line 2 = near dup of train 5
    report = find_duplicates({"train": train, "validation": validation, "test": test})
    found = {(p.match, p.first_split, p.first_row, p.second_split, p.second_row) for p in report.pairs}
    assert found == {
        ("exact", "train", 1, "train", 10),
        ("exact", "train", 3, "validation", 2),
        ("near", "train", 5, "test", 2),
    }
    near = next(p for p in report.pairs if p.match == "near")
    assert 0.8 <= near.similarity < 1.0 and near.contamination
    assert report.counts() == {
        "exact_within": 1,
        "near_within": 0,
        "exact_across": 1,
        "near_across": 1,
        "train_rows_to_drop": 3,
    }
    record = report.contamination_record()
    assert record["contaminated"] and record["pairs_by_split"] == {"validation": 1, "test": 1}

    kept = drop_from_train(train, report)
    assert kept.line_numbers == [1, 2, 4, 6, 7, 8, 9]
    assert kept.manifest.rows == 7 and kept.manifest.parent == train.manifest.sha256
    assert kept.manifest.sha256 != train.manifest.sha256


def test_threshold_is_configurable(tmp_path: Path) -> None:
    train = _load(tmp_path, "train", SENTENCES[:6])
    test = _load(tmp_path, "test", [NEAR_OF_4])
    assert find_duplicates({"train": train, "test": test}, threshold=0.99).pairs == []
    assert len(find_duplicates({"train": train, "test": test}, threshold=0.8).pairs) == 1


def test_shared_template_text_is_not_a_duplicate(
    alpaca_file: Path, chat_file: Path, sharegpt_file: Path
) -> None:
    # Every Alpaca prompt carries the same preamble and every chat may share a system prompt:
    # neither may make distinct rows look alike.
    for path in (alpaca_file, chat_file, sharegpt_file):
        assert find_duplicates({"train": load_dataset(path)}).pairs == []
