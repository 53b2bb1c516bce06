"""Several processes (DDP over gloo on the CPU) train exactly as one process with the same global batch.

Each case runs the engine child as the worker runs it: under torchrun for 2 processes, as a
plain process for 1. Same global batch means micro-batch × accumulation × processes is equal,
so every optimizer step sees the same examples: losses and final weights must then agree to
float summation order.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.integration.engine.engine_data import fast_config, metric_events, write_chat
from tests.integration.engine.launching import launch
from tunedeck.core.checkpoint_parts import missing_parts, written_by
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec

pytestmark = pytest.mark.slow
TOLERANCE = 1e-5


def _spec(model: Path, train: Path, out: Path, processes: int, **overrides: object) -> RunSpec:
    placement = {"devices": 0, "processes": processes} if processes > 1 else {}
    config = fast_config(batch_size=2, learning_rate=1e-3, lr_scheduler="constant", **placement, **overrides)
    return RunSpec(config, ModelRef(str(model)), train, out)


def _assert_same_training(one: Path, two: Path) -> None:
    losses_one = [event["loss"] for event in metric_events(one)]
    losses_two = [event["loss"] for event in metric_events(two)]
    assert len(losses_one) == len(losses_two) > 2
    assert losses_two == pytest.approx(losses_one, abs=TOLERANCE)
    # Tokens seen are counted on each process's host and summed across processes: the same count.
    assert [e["tokens_seen"] for e in metric_events(two)] == [e["tokens_seen"] for e in metric_events(one)]
    weights_one = load_file(one / "final" / "adapter_model.safetensors")
    weights_two = load_file(two / "final" / "adapter_model.safetensors")
    assert weights_one.keys() == weights_two.keys()
    for name, tensor in weights_one.items():
        assert (weights_two[name] - tensor).abs().max().item() < TOLERANCE, name


@pytest.mark.parametrize(
    ("rows", "accumulation_one", "extra"),
    [
        pytest.param(24, 2, {"chunked_cross_entropy": False, "packing": False}, id="accumulation"),
        # Packing puts several short examples in each row: more rows, shorter rows, for several steps.
        pytest.param(
            128, 4, {"chunked_cross_entropy": True, "packing": True, "max_length": 64}, id="packing-chunked-loss"
        ),
    ],
)
def test_two_processes_match_one_with_the_same_global_batch(
    tiny_llama_dir: Path, tmp_path: Path, rows: int, accumulation_one: int, extra: dict[str, object]
) -> None:
    train = write_chat(tmp_path, rows)
    one = _spec(tiny_llama_dir, train, tmp_path / "one", 1, gradient_accumulation_steps=accumulation_one, **extra)
    two = _spec(tiny_llama_dir, train, tmp_path / "two", 2, gradient_accumulation_steps=accumulation_one // 2, **extra)
    assert launch(one, 1, tmp_path / "launch-one") == 0, (tmp_path / "launch-one" / "output.log").read_text()
    assert launch(two, 2, tmp_path / "launch-two") == 0, (tmp_path / "launch-two" / "output.log").read_text()
    _assert_same_training(tmp_path / "one", tmp_path / "two")

    # Rank 0 alone writes events: one metric per step, and the run says how it was distributed.
    events = read_events(tmp_path / "two" / "events.jsonl")
    steps = [event["step"] for event in events if event["type"] == "metric"]
    assert steps == sorted(set(steps))
    distribution = next(event["distribution"] for event in events if "distribution" in event)
    assert distribution["strategy"] == "ddp" and distribution["world_size"] == 2
    assert [rank["rank"] for rank in distribution["ranks"]] == [0, 1]
    assert all(rank["device"] == "cpu" for rank in distribution["ranks"])
    chunked = next(event for event in events if "chunked_cross_entropy" in event)
    assert chunked["chunked_cross_entropy"] is extra["chunked_cross_entropy"]
    assert not list((tmp_path / "two").glob(".rank-*"))  # the other rank's scratch is gone


def test_a_checkpoint_holds_every_ranks_part_and_resumes_on_one_process(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 24)
    overrides = {"save_strategy": "steps", "save_steps": 2}
    two = _spec(tiny_llama_dir, train, tmp_path / "two", 2, gradient_accumulation_steps=1, **overrides)
    assert launch(two, 2, tmp_path / "launch-two") == 0, (tmp_path / "launch-two" / "output.log").read_text()
    checkpoint = tmp_path / "two" / "checkpoints" / "checkpoint-2"
    assert written_by(checkpoint) == 2 and missing_parts(checkpoint, 2) == []
    assert (checkpoint / "rng_state_0.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()
    saved = [event for event in read_events(tmp_path / "two" / "events.jsonl") if event["type"] == "checkpoint"]
    assert [event["parts"] for event in saved] == [2] * len(saved)

    # 2 → 1: one process takes twice the accumulation, so each step still sees the same examples.
    fetched = shutil.copytree(checkpoint, tmp_path / "fetched" / "checkpoint-2")
    one = _spec(tiny_llama_dir, train, tmp_path / "one", 1, gradient_accumulation_steps=1, **overrides)
    one.resume_from = fetched
    assert launch(one, 1, tmp_path / "launch-one") == 0, (tmp_path / "launch-one" / "output.log").read_text()
    expected = {event["step"]: event["loss"] for event in metric_events(tmp_path / "two") if event["step"] > 2}
    got = {event["step"]: event["loss"] for event in metric_events(tmp_path / "one")}
    assert sorted(got) == sorted(expected) and len(got) > 2
    for step, loss in expected.items():
        assert got[step] == pytest.approx(loss, abs=TOLERANCE), step
