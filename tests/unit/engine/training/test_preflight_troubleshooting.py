"""NaN loss stops the run with its troubleshooting advice; an out-of-memory retries with half the micro-batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integration.engine.engine_data import fast_config, metric_events, read_json, write_chat
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import RunFailedError, run_training


def _diagnoses(run: Path) -> list[dict[str, Any]]:
    return [event for event in read_events(run / "events.jsonl") if event["type"] == "diagnosis"]


def test_a_huge_learning_rate_stops_the_run_with_the_nan_diagnosis(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 16)
    # The config refuses rates above 1.0, which this tiny model survives; model_copy skips validation
    # to force the divergence a real model shows at much smaller rates.
    config = fast_config(epochs=4, batch_size=4, warmup_ratio=0.0, lr_scheduler="constant")
    config = config.model_copy(update={"learning_rate": 1e6})
    run = tmp_path / "run"
    with pytest.raises(RunFailedError, match=r"NaN|infinite"):
        run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, run))
    diagnoses = _diagnoses(run)
    assert [d["kind"] for d in diagnoses] == ["nan_loss"]
    nan = diagnoses[0]
    assert "this run uses 1e+06, try 200000" in nan["advice"][0]  # a fifth of the rate in use
    assert "bf16, or use fp32" in nan["advice"][1]
    assert "16 training examples, 0 with no trained token" in nan["advice"][2]
    assert nan["figures"]["learning_rate"] == 1e6 and nan["figures"]["data"]["total"] == 16
    stopped_at = nan["figures"]["step"]
    assert stopped_at < 16  # 4 epochs × 4 steps: the run stopped early
    assert [event["step"] for event in metric_events(run)][-1] == stopped_at
    assert read_json(run / "results.json")["status"] == "failed"
    assert not (run / "final").exists()


def _oom_above(limit: int, monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> None:
    from transformers import LlamaForCausalLM

    forward = LlamaForCausalLM.forward

    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        batch = kwargs["input_ids"].shape[0] if "input_ids" in kwargs else args[0].shape[0]
        calls.append(batch)
        if self.training and batch > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected at micro-batch {batch})")
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(LlamaForCausalLM, "forward", guarded)


@pytest.mark.slow
def test_an_out_of_memory_retries_with_half_the_micro_batch_keeping_the_effective_batch(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    _oom_above(2, monkeypatch, calls)
    train = write_chat(tmp_path, 16)
    # The injected out-of-memory counts the rows LlamaForCausalLM.forward gets: one example per row, and
    # the stock loss (the chunked one calls the decoder body and head, never that forward).
    config = fast_config(
        epochs=1, batch_size=8, gradient_accumulation_steps=1, packing=False, chunked_cross_entropy=False
    )
    run = tmp_path / "run"
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, run))
    assert result.status == "succeeded"
    assert result.global_step == result.total_steps == 2  # 16 rows / effective batch 8
    diagnoses = _diagnoses(run)
    assert [d["kind"] for d in diagnoses] == ["oom", "oom"]
    retries = [d["figures"]["retry"] for d in diagnoses]
    assert [(r["micro_batch"], r["accumulation"]) for r in retries] == [(4, 2), (2, 4)]
    assert "Reduce batch_size and compensate with gradient_accumulation_steps" in diagnoses[0]["advice"][0]
    batching = read_json(run / "results.json")["diagnostics"]["batching"]
    assert (batching["micro_batch"], batching["accumulation"]) == (2, 4)
    assert [a["outcome"] for a in batching["attempts"]] == ["oom", "oom", "completed"]
    assert max(calls[-8:]) == 2  # the successful attempt ran micro-batches of 2 only
    speed = read_json(run / "results.json")["diagnostics"]["training_speed"]
    assert speed["steps_measured"] == 2 and 0 <= speed["padding_share"] < 1


def test_without_auto_reduce_the_out_of_memory_fails_with_its_advice(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _oom_above(2, monkeypatch, [])
    train = write_chat(tmp_path, 8)
    config = fast_config(batch_size=8, auto_reduce_batch_on_oom=False, packing=False, chunked_cross_entropy=False)
    run = tmp_path / "run"
    with pytest.raises(RunFailedError, match="out of memory"):
        run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, run))
    [diagnosis] = _diagnoses(run)
    assert diagnosis["kind"] == "oom"
    assert diagnosis["figures"]["retry"]["reason"] == "auto_reduce_batch_on_oom is false"
    assert "8 × 1 = 8; 4 × 2 keeps it" in diagnosis["advice"][0]
