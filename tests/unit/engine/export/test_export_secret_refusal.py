"""Exports whose text files contain a secret are refused whole; recorded content hashes are not secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.core.errors import ConfigError, DataError
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.secrets_check import recorded_hashes, refuse_secrets
from tunedeck.engine.export.source import ModelFolder
from tunedeck.engine.models.pinning import PIN_FILE, BasePin

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
DIGEST = "9954559bf1311367dc7ac01f28227ccb9493f1774c0007c1156d5ead4b78f6cb"


def test_recorded_hashes_are_exempt_and_other_secrets_are_not() -> None:
    allowed = recorded_hashes([{"datasets": [{"sha256": DIGEST, "name": "x"}]}])
    assert allowed == {DIGEST}
    # Any `*_sha256` key the run records is a content hash (the chat template's, say).
    assert recorded_hashes([{"model": {"chat_template_sha256": DIGEST}}]) == {DIGEST}
    assert recorded_hashes([{"model": {"chat_template": DIGEST}}]) == set()
    refuse_secrets({"card.md": f"dataset sha256 `{DIGEST}`"}, allowed)  # passes
    with pytest.raises(DataError) as refused:
        refuse_secrets({"card.md": f"dataset sha256 `{DIGEST}`"}, set())
    assert refused.value.issues[0].file == "card.md" and refused.value.issues[0].line == 1
    with pytest.raises(DataError) as refused:
        refuse_secrets({"a.json": "{}", "b.md": f"line one\naws key {AWS_KEY}\n"}, allowed)
    (issue,) = refused.value.issues
    assert issue.file == "b.md" and issue.line == 2
    assert AWS_KEY not in str(refused.value)  # the report masks what it found


def test_job_ids_the_export_records_under_an_id_key_are_exempt() -> None:
    from tunedeck.core.ids import new_id

    recorded, other = new_id("job_"), new_id("job_")
    allowed = recorded_hashes([{"chain": [{"job_id": recorded}], "name": other}])
    assert allowed == {recorded}
    # Whether the scan flags an id depends on its random part: the recorded one passes however it reads.
    refuse_secrets({"README.md": f"job {recorded} (final, adapter)"}, allowed)


def _adapter_folder(tmp_path: Path, dataset_name: str) -> ModelFolder:
    model = tmp_path / "model"
    model.mkdir()
    (model / "adapter_model.safetensors").write_bytes(b"not read by an adapter export")
    (model / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    pin = BasePin("/models/base", "local", None, DIGEST, None)
    (model / PIN_FILE).write_text(json.dumps(pin.to_dict()))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"config": {"use_peft": True}, "task": "sft"}))
    manifest = {"datasets": [{"role": "train", "name": dataset_name, "rows": 3, "sha256": "b" * 64}]}
    (run / "data_manifest.json").write_text(json.dumps(manifest))
    return ModelFolder(model, "final", run)


def test_an_export_with_a_secret_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    folder = _adapter_folder(tmp_path, f"support tickets {AWS_KEY}")
    with pytest.raises(DataError, match="looks like a secret"):
        export_model(folder, "bundle", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_clean_adapter_export_keeps_peft_fields_and_writes_its_record(tmp_path: Path) -> None:
    result = export_model(_adapter_folder(tmp_path, "support tickets"), "adapter", tmp_path / "out")
    config = json.loads((tmp_path / "out" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4
    record = json.loads((tmp_path / "out" / "export.json").read_text())
    assert record["contents"] == "adapter" and record["pin"]["fingerprint"] == DIGEST and "out" not in record
    assert result.files == sorted(["README.md", "adapter_config.json", "adapter_model.safetensors", PIN_FILE])
    (tmp_path / "again").mkdir()
    with pytest.raises(ConfigError, match="not an empty folder"):
        export_model(_adapter_folder(tmp_path / "again", "x"), "adapter", tmp_path / "out")
