"""Several processes (DDP over gloo on the CPU) train exactly as one process with the same global batch.

Each case runs the engine child as the worker runs it: under torchrun for 2 processes, as a
plain process for 1. Same global batch means micro-batch × accumulation × processes is equal,
so every optimizer step sees the same examples: losses, tokens seen and final weights must then
agree to float summation order.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.integration.engine.conftest import ReferenceRun, reference_spec
from tests.integration.engine.engine_data import metric_events, write_chat
from tests.integration.engine.launching import launch
from tunedeck.core.checkpoint_parts import missing_parts, written_by
from tunedeck.core.events import read_events

pytestmark = pytest.mark.slow
TOLERANCE = 1e-5


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


def _launched(spec_processes: int, spec: object, folder: Path) -> None:
    assert launch(spec, spec_processes, folder) == 0, (folder / "output.log").read_text()  # type: ignore[arg-type]


def test_two_processes_match_one_with_accumulation(
    ddp_reference: ReferenceRun, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    one = reference_spec(tiny_llama_dir, ddp_reference.spec.train_path, tmp_path / "one", 1,
                         gradient_accumulation_steps=2)  # fmt: skip
    _launched(1, one, tmp_path / "launch-one")
    _assert_same_training(tmp_path / "one", ddp_reference.run_dir)

    # Rank 0 alone writes events: one metric per step, and the run says how it was distributed.
    events = read_events(ddp_reference.run_dir / "events.jsonl")
    steps = [event["step"] for event in events if event["type"] == "metric"]
    assert steps == sorted(set(steps))
    distribution = next(event["distribution"] for event in events if "distribution" in event)
    assert distribution["strategy"] == "ddp" and distribution["world_size"] == 2
    assert [rank["rank"] for rank in distribution["ranks"]] == [0, 1]
    assert all(rank["device"] == "cpu" for rank in distribution["ranks"])
    assert not list(ddp_reference.run_dir.glob(".rank-*"))  # the other rank's scratch is gone


def test_two_processes_match_one_with_packing_and_the_chunked_loss(tiny_llama_dir: Path, tmp_path: Path) -> None:
    # Packing puts several short examples in each row: more rows for several steps.
    train = write_chat(tmp_path, 128)
    extra = {"chunked_cross_entropy": True, "packing": True, "save_strategy": "no"}
    one = reference_spec(tiny_llama_dir, train, tmp_path / "one", 1, gradient_accumulation_steps=4, **extra)
    two = reference_spec(tiny_llama_dir, train, tmp_path / "two", 2, gradient_accumulation_steps=2, **extra)
    _launched(1, one, tmp_path / "launch-one")
    _launched(2, two, tmp_path / "launch-two")
    _assert_same_training(tmp_path / "one", tmp_path / "two")
    events = read_events(tmp_path / "two" / "events.jsonl")
    assert next(event for event in events if "chunked_cross_entropy" in event)["chunked_cross_entropy"] is True
    assert next(event for event in events if "packing" in event)["packing"] == "dataset"


def test_a_checkpoint_holds_every_ranks_part_and_resumes_on_one_process(
    ddp_reference: ReferenceRun, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    checkpoint = ddp_reference.run_dir / "checkpoints" / "checkpoint-2"
    assert written_by(checkpoint) == 2 and missing_parts(checkpoint, 2) == []
    assert (checkpoint / "rng_state_0.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()
    saved = [event for event in read_events(ddp_reference.run_dir / "events.jsonl") if event["type"] == "checkpoint"]
    assert [event["step"] for event in saved] == [2, 4, 6] and {event["parts"] for event in saved} == {2}

    # 2 → 1: one process takes twice the accumulation by itself, so each step still sees the same examples.
    fetched = shutil.copytree(checkpoint, tmp_path / "fetched" / "checkpoint-2")
    one = reference_spec(tiny_llama_dir, ddp_reference.spec.train_path, tmp_path / "one", 1)
    one.resume_from = fetched
    _launched(1, one, tmp_path / "launch-one")
    expected = {e["step"]: e["loss"] for e in metric_events(ddp_reference.run_dir) if e["step"] > 2}
    got = {e["step"]: e["loss"] for e in metric_events(tmp_path / "one")}
    assert sorted(got) == sorted(expected) == [3, 4, 5, 6]
    for step, loss in expected.items():
        assert got[step] == pytest.approx(loss, abs=TOLERANCE), step
