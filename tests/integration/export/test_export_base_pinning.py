"""An adapter is refused on a base with another fingerprint, and accepted with the explicit override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunedeck.cli.main import app
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.source import locate_model_folder
from tunedeck.engine.models.model_source import fingerprint_model_dir
from tunedeck.engine.models.pinning import BaseModelMismatchError, load_adapter_onto


def test_loading_onto_another_base_is_refused_naming_both(
    lora_run: Path, tiny_llama_dir: Path, other_base_dir: Path
) -> None:
    adapter = lora_run / "final"
    with pytest.raises(BaseModelMismatchError) as refused:
        load_adapter_onto(other_base_dir, adapter)
    message = str(refused.value)
    assert fingerprint_model_dir(tiny_llama_dir) in message  # the pinned base
    assert fingerprint_model_dir(other_base_dir) in message  # the base given
    assert "allow_mismatch" in message and "--allow-base-mismatch" in message

    with pytest.warns(UserWarning, match="base model mismatch"):
        loaded = load_adapter_onto(other_base_dir, adapter, allow_mismatch=True)
    assert loaded.model.config.rms_norm_eps == pytest.approx(2e-6, rel=0.5)  # really the other base


def test_merged_export_onto_another_base_needs_the_override(
    lora_run: Path, other_base_dir: Path, tmp_path: Path
) -> None:
    folder = locate_model_folder(lora_run)
    with pytest.raises(BaseModelMismatchError):
        export_model(folder, "merged", tmp_path / "refused", base=other_base_dir)
    assert not (tmp_path / "refused").exists()  # nothing half-written
    assert [p.name for p in tmp_path.iterdir()] == []

    with pytest.warns(UserWarning):
        result = export_model(folder, "merged", tmp_path / "forced", base=other_base_dir, allow_base_mismatch=True)
    assert any("trained on local folder" in warning for warning in result.warnings)
    record = json.loads((tmp_path / "forced" / "export.json").read_text())
    assert record["warnings"] == result.warnings
    assert "Warning:" in (tmp_path / "forced" / "README.md").read_text()


def test_cli_export_refuses_then_accepts_with_the_flag(lora_run: Path, other_base_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    common = ["export", "--run-dir", str(lora_run), "--format", "merged", "--base", str(other_base_dir)]
    refused = runner.invoke(app, [*common, "--out", str(tmp_path / "a")])
    assert refused.exit_code == 1, refused.output
    assert "--allow-base-mismatch" in refused.output
    accepted = runner.invoke(app, [*common, "--out", str(tmp_path / "b"), "--allow-base-mismatch"])
    assert accepted.exit_code == 0, accepted.output
    assert (tmp_path / "b" / "model.safetensors").is_file()
