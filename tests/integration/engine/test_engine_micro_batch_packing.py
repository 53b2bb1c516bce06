"""`packing: "auto"` trains exactly as padded batches do: same steps, same losses, fewer padded tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, read_json
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def _skewed_rows(path: Path, count: int) -> Path:
    """Prompt/completion rows whose lengths differ a lot, so padding a batch wastes most of it."""
    words = ["the", "small", "boat", "crosses", "a", "quiet", "river", "under", "green", "hills", "before", "the",
             "storm"]
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            prompt = " ".join(words[: 2 + index % 5]) + f" question {index}?"
            answer = " " + " ".join(words * (4 if index % 6 == 0 else 1))[: 12 + 9 * (index % 7)]
            handle.write(json.dumps({"prompt": prompt, "completion": answer}) + "\n")
    return path


@pytest.mark.parametrize("use_peft", [False, True])
def test_auto_packing_gives_the_losses_of_padded_training(
    tiny_llama_dir: Path, tmp_path: Path, use_peft: bool
) -> None:
    train = _skewed_rows(tmp_path / "rows.jsonl", 24)
    runs = {}
    for packing in ("auto", False):
        out = tmp_path / f"run-{packing}"
        config = fast_config(packing=packing, use_peft=use_peft, learning_rate=1e-3, epochs=2, max_length=128)
        result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, out))
        assert result.status == "succeeded"
        runs[packing] = out
    auto, padded = (metric_events(runs[key]) for key in ("auto", False))
    assert [e["step"] for e in auto] == [e["step"] for e in padded] == list(range(1, 7))
    for mine, theirs in zip(auto, padded, strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], abs=1e-4), (mine["step"], mine["loss"], theirs["loss"])
    assert (read_json(runs["auto"] / "config.json")["derived"]["total_steps"]
            == read_json(runs[False] / "config.json")["derived"]["total_steps"])
    modes = {key: next(e for e in read_events(runs[key] / "events.jsonl") if "packing" in e) for key in runs}
    assert modes["auto"]["packing"] == "micro_batch" and modes[False]["packing"] == "off"
    # On CPU with sdpa, packed rows attend per example (no T × T mask), and the run says so.
    assert modes["auto"]["packed_attention"]["path"] == "per_example"
    assert modes["auto"]["packed_attention"]["checked_difference"] < 1e-4
    assert modes[False]["packed_attention"] is None
