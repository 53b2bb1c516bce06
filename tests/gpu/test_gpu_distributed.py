"""Several GPUs: DDP matches one GPU, FSDP saves sharded checkpoints that resume on fewer GPUs and export whole.

Needs at least two CUDA GPUs; marker-gated like every test in tests/gpu. Each run is launched
as the worker launches it (torchrun for several processes), on the first GPUs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, write_chat
from tests.integration.engine.launching import launch
from tunedeck.core.checkpoint_parts import missing_parts
from tunedeck.core.events import read_events
from tunedeck.engine.distributed.sharded_checkpoint import find_sharded_model
from tunedeck.engine.export.exporter import export_model
from tunedeck.engine.export.source import locate_model_folder
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _two_gpus() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")


def _spec(model: Path, train: Path, out: Path, devices: int, **overrides: object) -> RunSpec:
    config = fast_config(batch_size=2, learning_rate=1e-3, lr_scheduler="constant", devices=devices, **overrides)
    return RunSpec(config, ModelRef(str(model)), train, out)


def _gpus(count: int) -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in range(count))}


def test_ddp_on_two_gpus_matches_one(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 32)
    one = _spec(tiny_llama_dir, train, tmp_path / "one", 1, gradient_accumulation_steps=2)
    two = _spec(tiny_llama_dir, train, tmp_path / "two", 2, gradient_accumulation_steps=1, strategy="ddp")
    assert launch(one, 1, tmp_path / "l1", env=_gpus(1)) == 0, (tmp_path / "l1" / "output.log").read_text()
    assert launch(two, 2, tmp_path / "l2", env=_gpus(2)) == 0, (tmp_path / "l2" / "output.log").read_text()
    losses_one = [event["loss"] for event in metric_events(tmp_path / "one")]
    losses_two = [event["loss"] for event in metric_events(tmp_path / "two")]
    assert losses_two == pytest.approx(losses_one, abs=1e-4)  # GPU reductions are not bit-exact


def test_fsdp_checkpoints_are_sharded_resume_on_one_gpu_and_export_whole(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 32)
    overrides = {"use_peft": False, "strategy": "fsdp", "save_strategy": "steps", "save_steps": 4}
    two = _spec(tiny_llama_dir, train, tmp_path / "two", 2, **overrides)
    assert launch(two, 2, tmp_path / "l2", env=_gpus(2)) == 0, (tmp_path / "l2" / "output.log").read_text()
    events = read_events(tmp_path / "two" / "events.jsonl")
    assert next(event["distribution"] for event in events if "distribution" in event)["strategy"] == "fsdp"
    checkpoint = tmp_path / "two" / "checkpoints" / "checkpoint-4"
    assert find_sharded_model(checkpoint) is not None and missing_parts(checkpoint, 2) == []

    # 2 → 1: FSDP reshards on load; the data order and the losses continue.
    fetched = shutil.copytree(checkpoint, tmp_path / "fetched" / "checkpoint-4")
    # The same config: on one process the run takes twice the accumulation by itself.
    one = _spec(tiny_llama_dir, train, tmp_path / "one", 1, **overrides)
    one.resume_from = fetched
    assert launch(one, 1, tmp_path / "l1", env=_gpus(1)) == 0, (tmp_path / "l1" / "output.log").read_text()
    expected = {e["step"]: e["loss"] for e in metric_events(tmp_path / "two") if e["step"] > 4}
    got = {e["step"]: e["loss"] for e in metric_events(tmp_path / "one")}
    assert sorted(got) == sorted(expected)
    for step, loss in expected.items():
        assert got[step] == pytest.approx(loss, abs=1e-3), step

    # The sharded checkpoint exports as plain safetensors.
    result = export_model(locate_model_folder(tmp_path / "two", 4), "merged", tmp_path / "export")
    assert any(name.endswith(".safetensors") for name in result.files)
