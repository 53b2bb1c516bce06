"""A real training run on a tiny model: learning, the run directory, which weights move, accumulation."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.integration.engine.engine_data import fast_config, metric_events, read_json, write_chat
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def test_lora_overfits_32_chat_examples_and_writes_the_run_directory(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 32)
    config = fast_config(epochs=10, warmup_ratio=0.1, lr_scheduler="cosine")
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run"))

    assert result.status == "succeeded"
    assert result.global_step == result.total_steps == 40
    assert result.first_loss is not None and result.last_loss is not None
    assert result.last_loss < result.first_loss / 2, (result.first_loss, result.last_loss)

    run = tmp_path / "run"
    resolved = read_json(run / "config.json")
    assert resolved["config"]["lr_scheduler"] == "cosine"
    derived = dict(resolved["derived"])
    strategy, ranks = derived.pop("strategy"), derived.pop("ranks")
    assert derived == {
        "effective_batch_size": 8,
        "micro_batches_per_epoch": 4,
        "steps_per_epoch": 4,
        "total_steps": 40,
        "warmup_steps": 4,
        "resolved_precision": "fp32",
        "resolved_gradient_checkpointing": False,
        "gradient_checkpointing_reason": "gradient_checkpointing: false",
        "processes": 1,
    }
    assert strategy["strategy"] == "none" and strategy["world_size"] == 1 and strategy["reason"] == "one process"
    assert [(rank["rank"], rank["device"]) for rank in ranks] == [(0, "cpu")]
    assert resolved["model"]["source"] == "local" and len(resolved["model"]["fingerprint"]) == 64
    assert 0 < resolved["model"]["trainable_parameters"] < resolved["model"]["total_parameters"]
    env = read_json(run / "env.json")
    assert env["packages"]["torch"] and env["hardware"]["backend"] == "cpu"
    manifest = read_json(run / "data_manifest.json")
    assert manifest["datasets"][0]["role"] == "train" and manifest["datasets"][0]["rows"] == 32
    assert len(manifest["datasets"][0]["sha256"]) == 64

    metrics = metric_events(run)
    assert [event["step"] for event in metrics] == list(range(1, 41))
    for event in metrics:
        assert {"loss", "learning_rate", "grad_norm", "tokens_per_second"} <= event.keys()
    events = read_events(run / "events.jsonl")
    check = next(event for event in events if event.get("message") == "first-step parameter check")
    assert check["ok"] and check["frozen_tensors"] > 0
    phases = [(event["name"], event["status"]) for event in events if event["type"] == "phase"]
    assert phases == [("training", "started"), ("training", "completed")]
    assert read_json(run / "results.json")["status"] == "succeeded"

    adapter = load_file(run / "final" / "adapter_model.safetensors")
    lora_b = [tensor for name, tensor in adapter.items() if "lora_B" in name]
    assert lora_b and all(bool(tensor.abs().sum() > 0) for tensor in lora_b)  # all moved from zero init
    assert not any("lora_" not in name for name in adapter)  # the adapter holds adapter weights only
    assert (run / "final" / "tokenizer.json").is_file()
    assert not list(run.rglob("training_args.bin"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_full_finetuning_changes_every_weight(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 16)
    config = fast_config(use_peft=False, learning_rate=1e-3, weight_decay=0.0)
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run"))
    before = load_file(tiny_llama_dir / "model.safetensors")
    after = load_file(result.run_dir / "final" / "model.safetensors")
    assert before.keys() == after.keys()
    unchanged = [name for name in before if bool((before[name] == after[name]).all())]
    assert unchanged == []


@pytest.mark.parametrize("use_peft", [False, True])
def test_accumulation_4x2_gives_the_per_step_losses_of_8x1(
    tiny_llama_dir: Path, tmp_path: Path, use_peft: bool
) -> None:
    train = write_chat(tmp_path, 24)
    losses = {}
    for batch, accumulation in ((8, 1), (4, 2)):
        config = fast_config(batch_size=batch, gradient_accumulation_steps=accumulation, use_peft=use_peft)
        out = tmp_path / f"run-{batch}x{accumulation}"
        run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, out))
        losses[batch] = [event["loss"] for event in metric_events(out)]
    assert len(losses[8]) == len(losses[4]) == 3
    assert losses[8] == pytest.approx(losses[4], abs=1e-5)
    assert losses[8][2] < losses[8][0]  # the steps really trained


class _FakeHub:
    """Resolves any hub id to the tiny model folder at a fixed commit, without a network."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def resolve(self, repo_id: str, revision: str | None) -> tuple[str, Path]:
        return "f" * 40, self.folder


def test_packed_sft_from_a_pinned_hub_model(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 24)
    config = fast_config(packing=True, use_peft=False, learning_rate=1e-3, max_length=96)
    spec = RunSpec(config, ModelRef("example-org/tiny-llama", "main"), train, tmp_path / "run")
    result = run_training(spec, hub=_FakeHub(tiny_llama_dir))
    assert result.status == "succeeded"
    manifest = read_json(tmp_path / "run" / "data_manifest.json")
    packing = manifest["tokenization"]["train"]["packing"]
    assert packing["examples"] == 24 and packing["rows"] < 24
    resolved = read_json(tmp_path / "run" / "config.json")
    assert resolved["derived"]["total_steps"] == -(-packing["rows"] // 8)  # steps count packed rows
    assert resolved["model"]["source"] == "hub" and resolved["model"]["revision"] == "f" * 40


def test_whole_dataset_packing_trains_one_row_per_forward_with_the_losses_of_rows_side_by_side(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from tunedeck.engine.training import run_plan

    train = write_chat(tmp_path, 48)
    config = fast_config(packing=True, use_peft=False, learning_rate=1e-3, max_length=96, batch_size=4)
    one_row = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "one-row"))
    monkeypatch.setattr(run_plan, "packed_row_steps", lambda config: config)  # the rows of a step side by side
    side_by_side = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "side-by-side"))

    assert one_row.global_step == side_by_side.global_step == one_row.total_steps >= 2
    losses = [[event["loss"] for event in metric_events(tmp_path / run)] for run in ("one-row", "side-by-side")]
    assert len(losses[0]) == one_row.global_step
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
    trained = [load_file(str(tmp_path / run / "final" / "model.safetensors")) for run in ("one-row", "side-by-side")]
    for name, tensor in trained[0].items():
        torch.testing.assert_close(tensor, trained[1][name], atol=1e-5, rtol=1e-4)
    assert read_json(tmp_path / "one-row" / "results.json")["diagnostics"]["batching"]["micro_batch"] == 1
    assert read_json(tmp_path / "one-row" / "results.json")["diagnostics"]["batching"]["accumulation"] == 4
    assert read_json(tmp_path / "side-by-side" / "results.json")["diagnostics"]["batching"]["micro_batch"] == 4
    split = next(event for event in read_events(tmp_path / "one-row" / "events.jsonl")
                 if str(event.get("message", "")).startswith("whole-dataset packing"))
    assert split["micro_batch"] == 1 and split["gradient_accumulation_steps"] == 4
    assert read_json(tmp_path / "one-row" / "config.json")["config"]["batch_size"] == 4  # the job as asked


def test_a_nan_loss_fails_the_run_with_a_diagnosis(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import Trainer

    from tunedeck.engine.training.training_run import RunFailedError

    real_step = Trainer.training_step

    def nan_step(self: Trainer, *args: object, **kwargs: object) -> torch.Tensor:
        loss = real_step(self, *args, **kwargs)  # gradients are real; only the reported loss is broken
        return loss * float("nan") if self.state.global_step >= 1 else loss

    monkeypatch.setattr(Trainer, "training_step", nan_step)
    train = write_chat(tmp_path, 16)
    with pytest.raises(RunFailedError, match="step 2"):
        run_training(RunSpec(fast_config(batch_size=4), ModelRef(str(tiny_llama_dir)), train, tmp_path / "run"))
    diagnoses = [event for event in read_events(tmp_path / "run" / "events.jsonl") if event["type"] == "diagnosis"]
    assert [event["kind"] for event in diagnoses] == ["nan_loss"]
    assert diagnoses[0]["advice"]
    results = read_json(tmp_path / "run" / "results.json")
    assert results["status"] == "failed" and results["global_step"] == 2
    assert not (tmp_path / "run" / "final").exists()
