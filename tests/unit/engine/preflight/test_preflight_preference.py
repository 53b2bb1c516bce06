"""The whole preflight on preference tasks, on a CPU with a tiny model: dpo with LoRA, kto fine-tuning every weight.

The pairs are tokenized by the test (`pretokenized_pairs`): what is checked here is what the
checks do with preference examples, not the data layer's tokenizer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preference_data import preference_spec, pretokenized_pairs  # noqa: F401 (fixture)
from tests.unit.engine.preflight.preflight_data import FAST_OPTIONS
from tunedeck.engine.preflight import run_preflight
from tunedeck.engine.preflight.full_step import measured_sizes, tiled_example

SAVING: dict[str, Any] = {"save_strategy": "steps", "save_steps": 2}


def _checks(tiny_llama_dir: Path, folder: Path, **config: Any) -> dict[str, dict[str, Any]]:
    report = run_preflight(preference_spec(tiny_llama_dir, folder, **config), options=FAST_OPTIONS)
    document = json.loads(json.dumps(report.to_dict()))
    assert [check["number"] for check in document["checks"]] == [*range(1, 9), 10, 11]
    # The numerics checks compare the supervised trainer's gradients; a preference task has none to compare.
    assert all(check["status"] == "skip" and "not applicable" in check["message"] for check in document["checks"][8:])
    return {check["name"]: check for check in document["checks"][:8]}


@pytest.mark.slow
def test_dpo_with_lora_passes_every_check_and_overfits_from_ln_2(
    tiny_llama_dir: Path,
    tmp_path: Path,
    pretokenized_pairs: None,  # noqa: F811
) -> None:
    checks = _checks(tiny_llama_dir, tmp_path, task="dpo", batch_size=4, learning_rate=5e-4, **SAVING)
    assert all(check["status"] in ("pass", "warn") for check in checks.values()), checks
    tokens = checks["tokenization"]["figures"]
    assert tokens["rows"] == tokens["examples"] == 8
    assert set(tokens["shown"][0]["answer_tokens"]) == {"chosen", "rejected"}
    assert all(count > 0 for count in tokens["shown"][0]["answer_tokens"].values())
    step = checks["full_step"]["figures"]
    assert set(step["measured"]) == {"2", "4"}
    four = step["measured"]["4"]
    # Both answers of every pair are tiled to max_length after their prompt: 4 × (prompt + 2 answers).
    assert four["sequence_length"] == 128 and 4 * 128 < four["tokens"] < 4 * 2 * 128
    assert step["reference_model"].startswith("the base model")
    assert step["measured"]["2"]["loss"] == pytest.approx(math.log(2), abs=1e-4)  # the model is its own reference
    overfit = checks["overfit"]
    assert overfit["status"] == "pass"
    assert overfit["figures"]["first_loss"] == pytest.approx(math.log(2), abs=1e-3)  # undone check 4's steps
    assert overfit["figures"]["drop"] >= FAST_OPTIONS.overfit_min_drop
    assert overfit["figures"]["last_reward_accuracy"] == 1.0 and overfit["figures"]["last_reward_margin"] > 0
    cycle = checks["checkpoint_cycle"]["figures"]
    assert checks["checkpoint_cycle"]["status"] == "pass" and cycle["steps_after_resume"] == [3]
    assert cycle["reloaded_loss"] == pytest.approx(cycle["reference_loss"], rel=1e-3, abs=1e-6)
    assert "adapter_model.safetensors" in cycle["checkpoint_files"] and cycle["generation"]["ok"]
    throughput = checks["throughput"]["figures"]
    assert throughput["measured_steps"] == 3 and throughput["tokens_per_second"] > 0
    margins = checks["margins"]["figures"]
    assert margins["total_steps"] == 2 and margins["checkpoint_bytes"] == cycle["checkpoint_bytes"]


@pytest.mark.slow
def test_kto_fine_tuning_every_weight_keeps_a_frozen_copy_and_never_measures_micro_batch_one(
    tiny_llama_dir: Path,
    tmp_path: Path,
    pretokenized_pairs: None,  # noqa: F811
) -> None:
    checks = _checks(
        tiny_llama_dir, tmp_path, task="kto", use_peft=False, batch_size=2, gradient_accumulation_steps=2,
        learning_rate=1e-4, **SAVING,
    )  # fmt: skip
    assert all(check["status"] in ("pass", "warn") for check in checks.values()), checks
    tokens = checks["tokenization"]["figures"]
    assert tokens["rows"] == 8 and tokens["examples"] == 16  # each pair: a desirable and an undesirable completion
    assert [shown["desirable"] for shown in tokens["shown"][:2]] == [True, False]
    step = checks["full_step"]["figures"]
    assert set(step["measured"]) == {"2", "4"}  # batch_size 2: measured at 2 and 4, never at 1
    assert step["reference_model"].startswith("a frozen copy")
    assert step["measured"]["2"]["sequence_length"] == 128
    assert checks["overfit"]["status"] == "pass"
    # kto's loss where the model is its own reference: 1 - sigmoid(0) = 0.5.
    assert checks["overfit"]["figures"]["first_loss"] == pytest.approx(0.5, abs=1e-3)
    cycle = checks["checkpoint_cycle"]["figures"]
    assert checks["checkpoint_cycle"]["status"] == "pass" and "model.safetensors" in cycle["checkpoint_files"]
    assert cycle["reloaded_loss"] == pytest.approx(cycle["reference_loss"], rel=1e-3, abs=1e-6)
    assert cycle["generation"]["new_tokens"] > 0


def test_tiling_repeats_the_answers_after_the_prompt_up_to_max_length() -> None:
    pair = {"prompt_ids": [1, 2, 3], "chosen_ids": [4, 5], "rejected_ids": [6]}
    tiled = tiled_example(pair, 8)
    assert tiled == {"prompt_ids": [1, 2, 3], "chosen_ids": [4, 5, 4, 5, 4], "rejected_ids": [6] * 5}
    unpaired = tiled_example({"prompt_ids": [1], "completion_ids": [7, 8], "label": False}, 4)
    assert unpaired == {"prompt_ids": [1], "completion_ids": [7, 8, 7], "label": False}
    assert tiled_example({"input_ids": [1, 2], "labels": [-100, 2]}, 5) == {
        "input_ids": [1, 2, 1, 2, 1], "labels": [-100, 2, -100, 2, -100],
    }  # fmt: skip


def test_the_step_is_measured_at_two_sizes_none_below_the_tasks_smallest() -> None:
    assert measured_sizes(8) == [4, 8]
    assert measured_sizes(1) == [1, 2]
    assert measured_sizes(2, smallest=2) == [2, 4]
    assert measured_sizes(3, smallest=2) == [2, 3]


def test_an_answer_left_with_no_token_fails_the_tokenization_check(tiny_llama_dir: Path) -> None:
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from tests.integration.engine.engine_data import fast_config
    from tunedeck.engine.preflight import PreflightOptions
    from tunedeck.engine.preflight.preference_tokenization import preference_tokenization
    from tunedeck.engine.training.training_data import ExampleDataset, PreparedData

    pairs = [
        {"prompt_ids": [1, 5, 6], "chosen_ids": [7, 8, 2], "rejected_ids": [9, 2]},
        {"prompt_ids": [1, 5], "chosen_ids": [], "rejected_ids": [9, 2]},  # cut to nothing by max_length
    ]
    data = PreparedData(ExampleDataset(pairs), None, "preference", [{"role": "train", "rows": 2}])
    ctx = SimpleNamespace(
        config=fast_config(task="dpo"),
        data=data,
        options=PreflightOptions(),
        tokenizer=AutoTokenizer.from_pretrained(tiny_llama_dir),
    )
    result = preference_tokenization(ctx)  # type: ignore[arg-type]
    assert result.status == "fail" and result.message == "example 1: the chosen answer has no token left"
    assert result.figures["tokens"] == (3 + 3 + 2) + (2 + 0 + 2)  # prompt + chosen + rejected
    assert result.figures["shown"][0]["answer_tokens"] == {"chosen": 3, "rejected": 2}
