"""The preference trainers on pre-tokenized rows: arguments per task, the reference model, reference-free dpo."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from tunedeck.config.derived import derive_values
from tunedeck.config.training import TrainingConfig
from tunedeck.engine.host.hardware import detect_hardware
from tunedeck.engine.preference.data import unpaired
from tunedeck.engine.preference.reference import REFERENCE_ADAPTER, choose_reference
from tunedeck.engine.preference.trainers import build_preference_trainer
from tunedeck.engine.training.trainer_setup import training_arguments
from tunedeck.eval.preference_scoring import ranked_right


def _config(task: str, **keys: Any) -> TrainingConfig:
    values: dict[str, Any] = {
        "task": task, "epochs": 1, "batch_size": 4, "gradient_accumulation_steps": 1, "learning_rate": 5e-3,
        "max_length": 64, "mixed_precision": "fp32", "eval_strategy": "no", "save_strategy": "no",
        "logging_steps": 1, "gradient_checkpointing": False, "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
    }  # fmt: skip
    values.update(keys)
    return TrainingConfig(**values)


def _pairs(tokenizer: Any, count: int = 8) -> list[dict[str, list[int]]]:
    pairs = []
    for index in range(count):
        prompt = tokenizer(f"name an animal {index}:", add_special_tokens=True)["input_ids"]
        good = tokenizer(" cat", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        bad = tokenizer(" blue", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        pairs.append({"prompt_ids": prompt, "chosen_ids": good, "rejected_ids": bad})
    return pairs


def _load(model_dir: Path, *, peft: bool) -> tuple[Any, Any]:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if peft:
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    return model, AutoTokenizer.from_pretrained(model_dir)


def _trainer(config: TrainingConfig, model: Any, tokenizer: Any, train: list[dict[str, Any]], out: Path) -> Any:
    args = training_arguments(config, derive_values(config, len(train)), detect_hardware(), "fp32", out, False)
    reference = choose_reference(config, model, config.use_peft)
    return build_preference_trainer(
        config.task, model=model, reference=reference.model, args=args, train=train, validation=None,
        tokenizer=tokenizer, callbacks=[], reference_free=config.reference_free,
    )  # fmt: skip


def test_each_task_gets_its_trainer_arguments_with_its_keys(tmp_path: Path) -> None:
    hardware, derived = detect_hardware(), derive_values(_config("dpo"), 8)
    dpo = training_arguments(_config("dpo", beta=0.25, loss_type=["sigmoid", "sft"], loss_weights=[1.0, 0.3]),
                             derived, hardware, "fp32", tmp_path, False)  # fmt: skip
    assert type(dpo).__name__ == "DPOConfig"
    assert (dpo.beta, dpo.loss_type, dpo.loss_weights) == (0.25, ["sigmoid", "sft"], [1.0, 0.3])
    kto = training_arguments(_config("kto", desirable_weight=1.3), derived, hardware, "fp32", tmp_path, False)
    # The default loss_type ("sigmoid") is dpo's: kto trains with its own default.
    assert (type(kto).__name__, kto.loss_type, kto.desirable_weight) == ("KTOConfig", "kto", 1.3)
    orpo = training_arguments(_config("orpo", beta=0.2), derived, hardware, "fp32", tmp_path, False)
    assert (type(orpo).__name__, orpo.beta) == ("ORPOConfig", 0.2)


def test_the_reference_is_a_frozen_adapter_copy_or_a_frozen_model_copy(tiny_llama_dir: Path) -> None:
    model, _ = _load(tiny_llama_dir, peft=True)
    assert choose_reference(_config("dpo"), model, True).model is None
    assert "the base model" in choose_reference(_config("dpo"), model, True).description
    model.add_adapter(REFERENCE_ADAPTER, model.peft_config["default"])
    assert "starting adapter" in choose_reference(_config("kto"), model, True).description
    assert "orpo" in choose_reference(_config("orpo"), model, True).description

    full, _ = _load(tiny_llama_dir, peft=False)
    copy = choose_reference(_config("dpo", use_peft=False), full, False).model
    assert copy is not None and copy is not full and not copy.training
    assert all(not p.requires_grad for p in copy.parameters())
    assert all(torch.equal(a, b) for a, b in zip(copy.parameters(), full.parameters(), strict=True))
    assert choose_reference(_config("dpo", use_peft=False, reference_free=True), full, False).model is None


@pytest.mark.parametrize("reference_free", [False, True])
def test_dpo_starts_at_ln2_against_its_reference_and_elsewhere_without_one(
    tiny_llama_dir: Path, tmp_path: Path, reference_free: bool
) -> None:
    model, tokenizer = _load(tiny_llama_dir, peft=True)
    config = _config("dpo", reference_free=reference_free)
    trainer = _trainer(config, model, tokenizer, _pairs(tokenizer), tmp_path / "out")
    trainer.train()
    first = trainer.state.log_history[0]
    if reference_free:
        # The reference log-probabilities are zero: the loss starts from the raw margin, not from ln 2.
        assert "ref_chosen_logps" in trainer.train_dataset.column_names
        assert abs(first["loss"] - math.log(2)) > 1e-3
    else:
        assert first["loss"] == pytest.approx(math.log(2), abs=1e-4)
        assert first["rewards/margins"] == pytest.approx(0.0, abs=1e-6)


def test_kto_unpairs_pairs_alternating_labels_and_trains(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = _load(tiny_llama_dir, peft=True)
    rows = unpaired(_pairs(tokenizer, 4))
    assert [row["label"] for row in rows] == [True, False] * 4
    trainer = _trainer(_config("kto"), model, tokenizer, rows, tmp_path / "out")
    assert "KL_completion_ids" in trainer.train_dataset.column_names
    trainer.train()
    assert all(math.isfinite(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry)


def test_orpo_builds_its_answer_columns_from_the_ids(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = _load(tiny_llama_dir, peft=True)
    pairs = _pairs(tokenizer, 4)
    trainer = _trainer(_config("orpo"), model, tokenizer, pairs, tmp_path / "out")
    row = trainer.train_dataset[0]
    prompt = pairs[0]["prompt_ids"]
    assert row["chosen_input_ids"] == prompt + pairs[0]["chosen_ids"]
    assert row["rejected_labels"] == [-100] * len(prompt) + pairs[0]["rejected_ids"]
    trainer.train()
    assert trainer.state.num_input_tokens_seen > 0


def test_ranked_right_counts_ties_as_half() -> None:
    assert ranked_right([2.0, 3.0], [1.0]) == 1.0
    assert ranked_right([1.0], [1.0]) == 0.5
    assert ranked_right([0.0, 2.0], [1.0, 3.0]) == 0.25
    assert ranked_right([], [1.0]) is None
