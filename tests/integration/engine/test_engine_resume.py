"""Resume continues a run exactly; pause and cancel obey the stop file; the child process reports by exit code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, read_json, write_chat
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError
from tunedeck.core.events import read_events
from tunedeck.engine import child
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def _resume_config(**overrides: object) -> TrainingConfig:
    # 16 examples, batch 4 → 4 steps an epoch, 5 epochs → 20 steps; the checkpoint at 10 is mid-epoch.
    values = {
        "epochs": 5,
        "batch_size": 4,
        "warmup_ratio": 0.1,
        "lr_scheduler": "cosine",
        "lora_dropout": 0.1,  # dropout draws random numbers: resume must restore the generator
        "save_strategy": "steps",
        "save_steps": 10,
    }
    values.update(overrides)
    return fast_config(**values)


def test_resume_from_step_10_reproduces_steps_11_to_20(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 16)
    model = ModelRef(str(tiny_llama_dir))
    whole = run_training(RunSpec(_resume_config(), model, train, tmp_path / "whole"))
    assert whole.global_step == 20
    checkpoint = tmp_path / "whole" / "checkpoints" / "checkpoint-10"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    for name in (
        "optimizer.pt",
        "scheduler.pt",
        "rng_state.pth",
        "trainer_state.json",
        "tunedeck_config.json",
        "tunedeck_env.json",
    ):
        assert (checkpoint / name).is_file(), name
    saved = [e for e in read_events(tmp_path / "whole" / "events.jsonl") if e["type"] == "checkpoint"]
    assert [e["step"] for e in saved] == [10, 20]

    # Resume from a copy, as a worker would after fetching the checkpoint, into a fresh run directory.
    fetched = shutil.copytree(checkpoint, tmp_path / "fetched" / "checkpoint-10")
    resumed = run_training(RunSpec(_resume_config(), model, train, tmp_path / "resumed", resume_from=fetched))
    assert resumed.global_step == 20

    expected = {e["step"]: e for e in metric_events(tmp_path / "whole") if e["step"] > 10}
    got = {e["step"]: e for e in metric_events(tmp_path / "resumed")}
    assert sorted(got) == list(range(11, 21))
    for step in range(11, 21):
        assert got[step]["loss"] == pytest.approx(expected[step]["loss"], abs=1e-6), step
        assert got[step]["learning_rate"] == pytest.approx(expected[step]["learning_rate"], abs=1e-12), step


def test_resume_into_the_same_run_directory_refuses_a_changed_config(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 16)
    model = ModelRef(str(tiny_llama_dir))
    run_training(RunSpec(_resume_config(epochs=3), model, train, tmp_path / "run"))
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-10"
    with pytest.raises(ConfigError, match="learning_rate"):
        run_training(
            RunSpec(
                _resume_config(epochs=3, learning_rate=1e-4), model, train, tmp_path / "run", resume_from=checkpoint
            )
        )
    with pytest.raises(ConfigError, match="already holds files"):
        run_training(RunSpec(_resume_config(epochs=3), model, train, tmp_path / "run"))


@pytest.mark.parametrize(("request_text", "status", "code"), [("pause", "paused", 3), ("cancel", "cancelled", 4)])
def test_stop_file_pauses_or_cancels_and_the_child_exits_with_its_code(
    tiny_llama_dir: Path, tmp_path: Path, request_text: str, status: str, code: int
) -> None:
    train = write_chat(tmp_path, 16)
    out = tmp_path / "run"
    out.mkdir()
    (out / "STOP").write_text(request_text)  # asked before the run directory is even made
    # No preflight: its trial steps come before the first step, where the stop file is read, and are not what is tested.
    config = fast_config(epochs=5, batch_size=4, preflight=False)
    spec = RunSpec(config, ModelRef(str(tiny_llama_dir)), train, out)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    assert child.main(["--spec", str(spec_file)]) == code
    results = read_json(out / "results.json")
    assert results["status"] == status and results["global_step"] == 1
    checkpoints = [p.name for p in (out / "checkpoints").iterdir()]
    assert checkpoints == (["checkpoint-1"] if status == "paused" else [])
    assert not (out / "final").exists()


def test_child_refuses_a_bad_spec_with_exit_code_2_and_leaves_nothing(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(
        json.dumps(
            {"config": {"batch_sise": 4}, "model": {"name": str(tmp_path)}, "train": "x", "out": str(tmp_path / "run")}
        )
    )
    assert child.main(["--spec", str(spec_file)]) == 2
    assert not (tmp_path / "run").exists()
