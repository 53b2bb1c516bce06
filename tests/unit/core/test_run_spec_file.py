"""The run spec file: one typed, versioned contract; files written before it was typed still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.core.run_spec import RUN_SPEC_VERSION, ModelName, RunSpecFile

# A spec as workers wrote it before the contract had a version (every key the engine then read).
OLDER_FILE = {
    "config": {"num_epochs": 1},
    "model": {"name": "models/tiny", "revision": None},
    "train": "inputs/train.jsonl",
    "validation": None,
    "out": "run",
    "resume_from": None,
    "cache_dir": "",
    "job_id": "job_1",
    "init_from": None,
    "lineage": None,
    "job_name": "first",
    "tracking": None,
    "guards": ["accuracy >= baseline"],
    "system_sample_seconds": None,
}


def test_a_file_without_a_version_reads_as_version_one_and_keeps_its_keys(tmp_path: Path) -> None:
    spec = RunSpecFile.parse(OLDER_FILE)
    assert spec.version == RUN_SPEC_VERSION == 1
    assert spec.model == ModelName(name="models/tiny") and spec.cache_dir is None and spec.processes == 1
    written = spec.write(tmp_path / "spec.json")
    again = json.loads(written.read_text(encoding="utf-8"))
    assert set(OLDER_FILE) <= set(again) and again["version"] == 1
    assert {key: again[key] for key in OLDER_FILE if key != "cache_dir"} == {
        key: value for key, value in OLDER_FILE.items() if key != "cache_dir"
    }
    assert RunSpecFile.read(written) == spec


def test_a_model_named_alone_and_the_memory_cap_setting() -> None:
    spec = RunSpecFile.parse({"model": "gpt2", "train": "t.jsonl", "out": "o", "memory_cap": "24GiB"})
    assert spec.model == ModelName(name="gpt2") and spec.memory_cap == "24GiB"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"train": ""}, "train", "missing"),
        ({"model": None}, "model", "missing"),
        ({"oom_restart": {"micro_batch": 0, "accumulation": 1}}, "oom_restart", "malformed"),
        ({"lineage": {"job_id": "a"}}, "lineage", "malformed"),
        ({"system_sample_seconds": True}, "system_sample_seconds", "malformed"),
        ({"version": RUN_SPEC_VERSION + 1}, "version", "malformed"),
    ],
)
def test_each_bad_field_is_named(change: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunSpecFile.parse({**OLDER_FILE, **change}, "spec.json")
    issue = caught.value.issues[0]
    assert (issue.field, issue.file) == (field, "spec.json") and issue.message.startswith(message)
    assert issue.expected


def test_a_spec_that_is_not_an_object_or_not_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid run spec"):
        RunSpecFile.parse(["not", "an", "object"])
    broken = tmp_path / "spec.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        RunSpecFile.read(broken)
    assert "invalid JSON" in caught.value.issues[0].message
