"""A sealed test set that repeats training or validation rows is refused before scoring, unless allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tunedeck.core.errors import ConfigError
from tunedeck.data.loading import load_dataset
from tunedeck.eval.test_contamination import check_test_contamination, require_clean_test_set

LABEL2ID = {"food": 0, "sport": 1, "weather": 2}
TEST_ROWS = [
    {"text": "A chef simmered onion soup for three patient hours in a copper pot.", "label": "food"},
    {"text": "The striker scored twice before the referee ended the rainy derby.", "label": "sport"},
    {"text": "Thunder rolled over the valley while the forecast promised sunshine.", "label": "weather"},
    {"text": "Our bakery tested sourdough loaves with rye, honey and roasted walnuts.", "label": "food"},
]
TRAIN_ROWS = [
    {"text": "the STRIKER scored twice before the referee ended the rainy   derby.", "label": "sport"},  # exact
    {"text": "Coaches argued about the tournament schedule for the whole winter.", "label": "sport"},
    {"text": "Snow closed the mountain pass and the wind bent the old pines.", "label": "weather"},
]
VALIDATION_ROWS = [
    {"text": "Our bakery tested sourdough loaves with rye, honey and roasted walnut.", "label": "food"},  # near
    {"text": "Fog lingered over the harbour until the late afternoon ferry left.", "label": "weather"},
]


def test_the_check_names_the_test_rows_that_repeat_seen_data(tmp_path: Path) -> None:
    test = load_dataset(write_jsonl(tmp_path / "test.jsonl", TEST_ROWS))
    seen = {
        "train": load_dataset(write_jsonl(tmp_path / "train.jsonl", TRAIN_ROWS)),
        "validation": load_dataset(write_jsonl(tmp_path / "validation.jsonl", VALIDATION_ROWS)),
    }
    check = check_test_contamination(test, seen)
    assert check.contaminated and check.rows == [2, 4]
    assert check.pairs_by_split == {"train": {"exact": 1, "near": 0}, "validation": {"exact": 0, "near": 1}}
    with pytest.raises(ConfigError) as refused:
        require_clean_test_set(check, allow_contamination=False)
    assert "2 of 4 test rows" in str(refused.value) and "test rows 2, 4" in str(refused.value)
    warning = require_clean_test_set(check, allow_contamination=True)
    assert warning is not None and "scored anyway" in warning and "test rows 2, 4" in warning
    clean = check_test_contamination(test, {"train": seen["train"]}, unchecked=[])
    assert clean.rows == [2]
    only_other = check_test_contamination(load_dataset(write_jsonl(tmp_path / "t2.jsonl", TEST_ROWS[2:3])), seen)
    assert not only_other.contaminated and require_clean_test_set(only_other, allow_contamination=False) is None


def test_eval_test_refuses_a_contaminated_set_and_the_flag_records_the_warning(
    tiny_bert_dir: Path, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tunedeck.cli.main import app
    from tunedeck.storage.base import final_prefix
    from tunedeck.storage.factory import open_store
    from tunedeck.store.models import Job
    from tunedeck.store.store import JobStore

    storage_url = (tmp_path / "artifacts").resolve().as_uri()
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", storage_url)
    artifacts = open_store(storage_url)
    with JobStore.open(sqlite_url, migrate=False) as store:
        owner = store.users.create_user("alice")
        versions = {}
        for name, rows in (("train", TRAIN_ROWS), ("validation", VALIDATION_ROWS), ("test", TEST_ROWS)):
            dataset = store.datasets.create_dataset(owner, f"topics-{name}")
            key = f"users/{owner.id}/datasets/topics-{name}/data.jsonl"
            artifacts.put_file(key, write_jsonl(tmp_path / f"{name}.jsonl", rows))
            versions[name] = store.datasets.add_version(
                owner, dataset.id, sha256=name[0] * 64, format="classification", rows=len(rows), storage_key=key,
                kind=name, sealed=name == "test",
            )  # fmt: skip
        job = store.jobs.enqueue(
            owner, name="cls", config={"task": "classification", "max_length": 32},
            train_dataset_version_id=versions["train"].id, validation_dataset_version_id=versions["validation"].id,
        )  # fmt: skip
        with store.db.write() as session:
            session.get(Job, job.id).state = "succeeded"  # type: ignore[union-attr]
        model = AutoModelForSequenceClassification.from_pretrained(
            tiny_bert_dir, num_labels=3, label2id=LABEL2ID, id2label={i: label for label, i in LABEL2ID.items()}
        )
        final = tmp_path / "final"
        model.save_pretrained(final)
        AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(final)
        (final / "tunedeck_config.json").write_text(
            json.dumps({"task": "classification", "label2id": LABEL2ID, "data_kind": "classification"})
        )
        artifacts.commit_directory(final, final_prefix(owner.id, job.id))

    runner = CliRunner()
    base = ["eval", "test", "--job", job.id, "--dataset", versions["test"].id, "--database-url", sqlite_url]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 1
    assert "contaminated" in refused.output and "2 of 4 test rows" in refused.output
    assert "test rows 2, 4" in refused.output and "accuracy" not in refused.output
    with JobStore.open(sqlite_url, migrate=False) as store:
        assert store.datasets.list_test_set_accesses(owner, versions["test"].id) == []

    out = tmp_path / "result.json"
    allowed = runner.invoke(app, [*base, "--allow-contamination", "--out", str(out)])
    assert allowed.exit_code == 0, allowed.output
    assert "scored anyway" in allowed.output and "accuracy" in allowed.output
    written = json.loads(out.read_text())
    assert written["contamination"]["contaminated"] and written["contamination"]["rows"] == [2, 4]
    assert "scored anyway" in written["contamination"]["warning"]
    with JobStore.open(sqlite_url, migrate=False) as store:
        (access,) = store.datasets.list_test_set_accesses(owner, versions["test"].id)
    assert "contaminated" in access.purpose
