"""`tunedeck models facts FOLDER` says what a model folder's files tell of it, and refuses a folder that is not one."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tests.fixtures.model_folders import PARAMETERS_PER_SHARD, write_model_folder
from tunedeck.cli.main import app


def test_the_facts_of_a_model_folder(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "model", chat_template=False)
    result = CliRunner().invoke(app, ["models", "facts", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"parameters: {PARAMETERS_PER_SHARD} ({PARAMETERS_PER_SHARD})" in result.output
    assert "architecture: LlamaForCausalLM" in result.output
    assert "licence: apache-2.0" in result.output and "chat template: no" in result.output


def test_a_folder_without_a_config_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["models", "facts", str(tmp_path)])
    assert result.exit_code != 0
    assert "not a model folder" in result.output
