"""`chunked_cross_entropy` trains as the stock loss does: same logged losses step by step, and says it was on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, write_chat
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def test_chunked_cross_entropy_gives_the_losses_of_the_stock_loss(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.engine.speedups import chunked_loss

    train = write_chat(tmp_path, 16)
    calls: list[int] = []
    original = chunked_loss.chunked_causal_lm_loss

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)  # so a silent fallback to the stock loss shows
        return original(*args, **kwargs)

    monkeypatch.setattr(chunked_loss, "chunked_causal_lm_loss", counted)
    runs = {}
    for chunked in (True, False):
        out = tmp_path / f"run-{chunked}"
        # Accumulation: the trainer's num_items_in_batch must divide the chunked sum as it divides the stock one.
        config = fast_config(
            chunked_cross_entropy=chunked, batch_size=4, gradient_accumulation_steps=2, epochs=2, learning_rate=1e-3
        )
        result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, out))
        assert result.status == "succeeded"
        runs[chunked] = out
    assert len(calls) == 8  # the chunked run's 4 steps × 2 micro-batches; none in the stock run
    on, off = metric_events(runs[True]), metric_events(runs[False])
    assert [e["step"] for e in on] == [e["step"] for e in off] == list(range(1, 5))
    for mine, theirs in zip(on, off, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], abs=1e-4), (mine["step"], mine["loss"], theirs["loss"])
    modes = {key: next(e for e in read_events(runs[key] / "events.jsonl") if "chunked_cross_entropy" in e)
             for key in runs}
    assert modes[True]["chunked_cross_entropy"] is True
    assert modes[True]["message"].startswith("chunked cross-entropy: on; at most ")
    budget = modes[True]["chunked_cross_entropy_logits"]  # the memory the loss may hold, and where it comes from
    assert budget["chunk_logits"] > 0 and budget["headroom_source"] in ("host", "accelerator", "preflight")
    assert modes[False]["chunked_cross_entropy"] is False
    assert modes[False]["chunked_cross_entropy_reason"] == "chunked_cross_entropy: false"
