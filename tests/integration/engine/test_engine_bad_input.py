"""Bad input is refused before training with a clear error, and leaves no run directory behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, DataError, HardwareError, ModelLoadError, TunedeckError
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def _refused(
    model: Path, train: Path, out: Path, error: type[TunedeckError], match: str, config: TrainingConfig | None = None
) -> str:
    with pytest.raises(error, match=match) as caught:
        run_training(RunSpec(config or fast_config(), ModelRef(str(model)), train, out))
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging left either
    return str(caught.value)


def test_missing_data_file(tiny_llama_dir: Path, tmp_path: Path) -> None:
    message = _refused(tiny_llama_dir, tmp_path / "nope.jsonl", tmp_path / "run", DataError, "not found")
    assert "nope.jsonl" in message


def test_malformed_data_file_names_the_line(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 4)
    train.write_text(train.read_text() + '{"messages": [ broken\n')
    message = _refused(tiny_llama_dir, train, tmp_path / "run", DataError, "chat.jsonl")
    assert ":5" in message


def test_model_folder_without_weights(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = shutil.copytree(tiny_llama_dir, tmp_path / "model")
    (model / "model.safetensors").unlink()
    _refused(model, write_chat(tmp_path, 4), tmp_path / "run", ModelLoadError, "no weights")


def test_chat_data_for_a_tokenizer_without_chat_template(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = shutil.copytree(tiny_llama_dir, tmp_path / "model")
    (model / "chat_template.jinja").unlink()
    _refused(model, write_chat(tmp_path, 4), tmp_path / "run", DataError, "chat template")


def test_max_length_above_the_models_positions(tiny_llama_dir: Path, tmp_path: Path) -> None:
    message = _refused(
        tiny_llama_dir,
        write_chat(tmp_path, 4),
        tmp_path / "run",
        ConfigError,
        "max_length",
        config=fast_config(max_length=4096),
    )
    assert "at most 512" in message and "4096" in message


def test_precision_the_cpu_lacks(tiny_llama_dir: Path, tmp_path: Path) -> None:
    _refused(
        tiny_llama_dir,
        write_chat(tmp_path, 4),
        tmp_path / "run",
        HardwareError,
        "fp32",
        config=fast_config(mixed_precision="bf16"),
    )


def test_qlora_off_cuda(tiny_llama_dir: Path, tmp_path: Path) -> None:
    _refused(
        tiny_llama_dir,
        write_chat(tmp_path, 4),
        tmp_path / "run",
        HardwareError,
        "qlora",
        config=fast_config(peft_method="qlora"),
    )


def test_early_stopping_without_a_validation_file(tiny_llama_dir: Path, tmp_path: Path) -> None:
    _refused(
        tiny_llama_dir,
        write_chat(tmp_path, 4),
        tmp_path / "run",
        ConfigError,
        "validation file",
        config=fast_config(eval_strategy="epoch", early_stopping_patience=2),
    )
