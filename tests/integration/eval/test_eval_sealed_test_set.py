"""The sealed test set: evaluated only for a chosen job, every access logged, the second one warns."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tests.integration.eval.eval_data import TOPICS, topic_rows
from tunedeck.eval.runner import make_procedure
from tunedeck.eval.sealed_test import TestSetAccess as Access
from tunedeck.eval.sealed_test import TestSetReuseWarning as ReuseWarning
from tunedeck.eval.sealed_test import evaluate_sealed_test

LABEL2ID = {label: index for index, label in enumerate(sorted(TOPICS))}


def _classifier(tiny_bert_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert_dir, num_labels=3, label2id=LABEL2ID, id2label={i: label for label, i in LABEL2ID.items()}
    )
    return model, AutoTokenizer.from_pretrained(tiny_bert_dir)


class MemoryLog:
    """An access log kept in a list."""

    def __init__(self) -> None:
        self.entries: list[Access] = []

    def record(self, *, job_id: str, purpose: str) -> None:
        self.entries.append(Access(job_id=job_id, user_id="u", purpose=purpose, time=None))

    def accesses(self) -> list[Access]:
        return list(self.entries)


def test_second_access_warns_and_both_are_logged(tiny_bert_dir: Path) -> None:
    model, tokenizer = _classifier(tiny_bert_dir)
    rows = topic_rows(2, seed=5)
    procedure = make_procedure(rows, "classification", task="classification", max_length=32, labels=sorted(TOPICS))
    log = MemoryLog()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReuseWarning)  # the first access must not warn
        first = evaluate_sealed_test(model, tokenizer, rows, procedure, job_id="job_a", access_log=log)
    assert first.warning is None and len(first.accesses) == 1
    with pytest.warns(ReuseWarning, match="evaluated 2 times"):
        second = evaluate_sealed_test(model, tokenizer, rows, procedure, job_id="job_b", access_log=log)
    assert second.warning is not None and "job_a, job_b" in second.warning
    assert [access.job_id for access in log.entries] == ["job_a", "job_b"]
    assert second.to_dict()["sealed_test"]["access_count"] == 2
    assert first.result.metrics == second.result.metrics  # same model, same procedure, same numbers


def test_a_job_must_be_named(tiny_bert_dir: Path) -> None:
    model, tokenizer = _classifier(tiny_bert_dir)
    rows = topic_rows(1, seed=5)
    procedure = make_procedure(rows, "classification", task="classification", max_length=32)
    log = MemoryLog()
    with pytest.raises(Exception, match="chosen job"):
        evaluate_sealed_test(model, tokenizer, rows, procedure, job_id="", access_log=log)
    assert log.entries == []


def test_cli_evaluates_a_sealed_version_for_a_job_and_logs_each_access(
    tiny_bert_dir: Path, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.cli.main import app
    from tunedeck.storage.base import final_prefix, job_prefix
    from tunedeck.storage.factory import open_store
    from tunedeck.store.models import Job
    from tunedeck.store.store import JobStore

    storage_url = (tmp_path / "artifacts").resolve().as_uri()
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", storage_url)
    artifacts = open_store(storage_url)
    with JobStore.open(sqlite_url, migrate=False) as store:
        owner = store.users.create_user("alice")
        dataset = store.datasets.create_dataset(owner, "topics-test")
        test_file = write_jsonl(tmp_path / "test.jsonl", topic_rows(2, seed=9))
        key = f"users/{owner.id}/datasets/topics-test/data.jsonl"
        artifacts.put_file(key, test_file)
        unsealed = store.datasets.add_version(owner, dataset.id, sha256="0" * 64, format="classification",
                                              rows=6, storage_key=key, kind="test")  # fmt: skip
        sealed = store.datasets.add_version(owner, dataset.id, sha256="0" * 64, format="classification",
                                            rows=6, storage_key=key, kind="test", sealed=True)  # fmt: skip
        job = store.jobs.enqueue(owner, name="cls", config={"task": "classification", "max_length": 32})
        with store.db.write() as session:
            session.get(Job, job.id).state = "succeeded"  # type: ignore[union-attr]
        model, tokenizer = _classifier(tiny_bert_dir)
        final = tmp_path / "final"
        model.save_pretrained(final)
        tokenizer.save_pretrained(final)
        (final / "tunedeck_config.json").write_text(
            json.dumps({"task": "classification", "label2id": LABEL2ID, "data_kind": "classification"})
        )
        artifacts.commit_directory(final, final_prefix(owner.id, job.id))

    runner = CliRunner()
    base = ["eval", "test", "--job", job.id, "--database-url", sqlite_url]
    refused = runner.invoke(app, [*base, "--dataset", unsealed.id])
    assert refused.exit_code == 1 and "not sealed" in refused.output
    first = runner.invoke(app, [*base, "--dataset", sealed.id, "--out", str(tmp_path / "first.json")])
    assert first.exit_code == 0, first.output
    assert "warning" not in first.output and "accuracy" in first.output
    second = runner.invoke(app, [*base, "--dataset", sealed.id])
    assert second.exit_code == 0, second.output
    assert "warning" in second.output and "evaluated 2 times" in second.output

    with JobStore.open(sqlite_url, migrate=False) as store:
        accesses = store.datasets.list_test_set_accesses(owner, sealed.id)
    assert [access.job_id for access in accesses] == [job.id, job.id]
    written = json.loads((tmp_path / "first.json").read_text())
    assert written["sealed_test"]["access_count"] == 1 and written["dataset"] == sealed.id
    assert len(written["examples"]) == 6
    assert len(artifacts.list(f"{job_prefix(owner.id, job.id)}/test_evals")) == 2
