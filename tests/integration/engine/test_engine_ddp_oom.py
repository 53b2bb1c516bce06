"""An out-of-memory on one of two processes: both restart with half the micro-batch and train on exactly.

The process that ran out cannot retry alone (the other waits for it in a collective), so it
asks for the retry in the run directory and fails; torchrun restarts both, and they go on
from the newest complete checkpoint with micro-batch 1 × accumulation 2 instead of 2 × 1:
the same global batch, so the same losses as the reference run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.engine.conftest import ReferenceRun, reference_spec
from tests.integration.engine.engine_data import metric_events
from tests.integration.engine.launching import launch
from tunedeck.core.events import read_events
from tunedeck.core.failpoints import ENV_POINTS, ENV_STATE

pytestmark = pytest.mark.slow
TOLERANCE = 1e-5


def test_an_out_of_memory_on_one_rank_restarts_both_with_half_the_micro_batch(
    ddp_reference: ReferenceRun, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    spec = reference_spec(tiny_llama_dir, ddp_reference.spec.train_path, tmp_path / "run", 2)
    env = {ENV_POINTS: "engine_rank1_oom_step3", ENV_STATE: str(tmp_path / "points")}
    assert launch(spec, 2, tmp_path / "launch", env=env) == 0, (tmp_path / "launch" / "output.log").read_text()

    run = tmp_path / "run"
    events = read_events(run / "events.jsonl")
    oom = [event for event in events if event["type"] == "diagnosis" and event["kind"] == "oom"]
    assert len(oom) == 1 and oom[0]["rank"] == 1
    assert {key: oom[0]["figures"]["retry"][key] for key in ("micro_batch", "accumulation")} == {
        "micro_batch": 1, "accumulation": 2,
    }  # fmt: skip
    assert "retrying with micro-batch 1" in oom[0]["message"]
    # The restarted group went on from checkpoint 2 and logged every step once.
    losses, reference = metric_events(run), metric_events(ddp_reference.run_dir)
    assert [event["step"] for event in losses] == [event["step"] for event in reference] == [1, 2, 3, 4, 5, 6]
    assert [event["loss"] for event in losses] == pytest.approx([event["loss"] for event in reference], abs=TOLERANCE)
    batching = json.loads((run / "results.json").read_text(encoding="utf-8"))["diagnostics"]["batching"]
    assert (batching["micro_batch"], batching["accumulation"]) == (1, 2)
    assert [attempt["outcome"] for attempt in batching["attempts"]] == ["oom", "completed"]
    assert not (run / "oom-restart.json").exists()  # applied once
