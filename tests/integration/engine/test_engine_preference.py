"""dpo, orpo and kto learn a preference rule through the whole run; a killed dpo run resumes exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.data import write_jsonl
from tests.integration.engine.engine_data import fast_config, metric_events, read_json
from tests.waiting import HANG_S
from tunedeck.core.failpoints import ENV_POINTS, ENV_STATE
from tunedeck.demo.preference_pairs import preference_pairs, unpaired_rows
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

# orpo adds its odds-ratio term to the sft loss of the chosen answer, weighted by beta: on a tiny
# model and a few steps the ranking is learnt when that term is not outweighed (the ORPO paper's 0.1
# is for large models, whose sft loss is already low).
TASK_KEYS: dict[str, dict[str, Any]] = {"dpo": {"beta": 0.1}, "orpo": {"beta": 1.0, "learning_rate": 1e-2}}


def _config(task: str, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "task": task, "epochs": 4, "batch_size": 8, "learning_rate": 5e-3, "max_length": 64,
        "eval_max_new_tokens": 4, "preflight": False,
        **TASK_KEYS.get(task, {}),
    }  # fmt: skip
    values.update(overrides)
    return fast_config(**values)


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("preference-data")
    train = preference_pairs(64, seed=1)
    return {
        "train": write_jsonl(folder / "train.jsonl", train),
        "unpaired": write_jsonl(folder / "unpaired.jsonl", unpaired_rows(train)),
        "validation": write_jsonl(folder / "validation.jsonl", preference_pairs(32, seed=2)),
    }


@pytest.mark.parametrize("task", ["dpo", "orpo", "kto"])
def test_each_task_raises_validation_reward_accuracy_from_chance_to_above_0_9(
    tiny_llama_dir: Path, tmp_path: Path, pair_files: dict[str, Path], task: str
) -> None:
    train = pair_files["unpaired" if task == "kto" else "train"]
    spec = RunSpec(_config(task), ModelRef(str(tiny_llama_dir)), train, tmp_path / "run",
                   validation_path=pair_files["validation"])  # fmt: skip
    result = run_training(spec)
    assert result.status == "succeeded"
    baseline = read_json(tmp_path / "run" / "baseline_eval.json")
    final = read_json(tmp_path / "run" / "final_eval.json")
    assert baseline["procedure_sha256"] == final["procedure_sha256"]
    # The untrained model prefers one kind of word whatever the prompt asks: about half the pairs.
    assert 0.3 <= baseline["metrics"]["reward_accuracy"] <= 0.7, baseline["metrics"]
    assert final["metrics"]["reward_accuracy"] >= 0.9, final["metrics"]
    assert final["metrics"]["reward_margin"] > baseline["metrics"]["reward_margin"]
    # The chosen answers are references too: the greedy answers are scored as supervised ones.
    assert {"exact_match", "token_f1", "eval_loss"} <= set(final["metrics"])
    # TRL's reward metrics reach the event log (the job page charts them).
    logged = {key for event in metric_events(tmp_path / "run") for key in event}
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins"} <= logged


def test_a_dpo_run_killed_after_a_checkpoint_resumes_with_the_uninterrupted_losses(
    tiny_llama_dir: Path, tmp_path: Path, pair_files: dict[str, Path]
) -> None:
    # 64 pairs, micro-batch 8 → 8 steps an epoch, 2 epochs → 16 steps; the checkpoint at 12 is mid-epoch.
    config = _config("dpo", epochs=2, save_strategy="steps", save_steps=12, lora_dropout=0.1, warmup_ratio=0.1,
                     lr_scheduler="cosine")  # fmt: skip
    model, train = ModelRef(str(tiny_llama_dir)), pair_files["train"]
    whole = run_training(RunSpec(config, model, train, tmp_path / "whole"))
    assert whole.global_step == 16

    # The engine process is SIGKILLed (with its process group) right after writing checkpoint-12,
    # as a worker machine going down would leave it; the run then resumes in the same run directory.
    killed = tmp_path / "killed"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(RunSpec(config, model, train, killed).to_dict()), encoding="utf-8")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", ENV_POINTS: "engine_checkpoint_saved",
           ENV_STATE: str(tmp_path / "failpoints")}  # fmt: skip
    child = subprocess.run(
        [sys.executable, "-m", "tunedeck.engine.child", "--spec", str(spec_file)],
        env=env, start_new_session=True, capture_output=True, text=True, timeout=HANG_S * 2,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert not (killed / "results.json").exists() and not (killed / "checkpoints" / "checkpoint-16").exists()
    checkpoint = killed / "checkpoints" / "checkpoint-12"
    resumed = run_training(RunSpec(config, model, train, killed, resume_from=checkpoint))
    assert resumed.global_step == 16
    expected = {e["step"]: e for e in metric_events(tmp_path / "whole")}
    got = {e["step"]: e for e in metric_events(killed)}  # the killed attempt's steps, then the resumed ones
    assert sorted(got) == sorted(expected) == list(range(1, 17))
    for step in range(1, 17):
        assert got[step]["loss"] == pytest.approx(expected[step]["loss"], abs=1e-6), step
        assert got[step]["rewards/margins"] == pytest.approx(expected[step]["rewards/margins"], abs=1e-5), step
