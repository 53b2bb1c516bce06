"""The preference keys: accepted for the tasks they apply to, refused with the reason elsewhere."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tunedeck.config.preference import KEY_TASKS, loss_types, needs_reference_copy
from tunedeck.config.training import TrainingConfig


def _refusal(**keys: object) -> str:
    with pytest.raises(ValidationError) as caught:
        TrainingConfig(**keys)
    return str(caught.value)


def test_each_task_accepts_its_own_keys_and_a_full_dump_revalidates() -> None:
    dpo = TrainingConfig(task="dpo", beta=0.2, loss_type=["sigmoid", "sft"], loss_weights=[1.0, 0.5],
                         max_prompt_length=64, reference_free=True)  # fmt: skip
    assert loss_types(dpo) == ["sigmoid", "sft"]
    kto = TrainingConfig(task="kto", desirable_weight=1.5, undesirable_weight=0.5, loss_type="apo_zero_unpaired")
    orpo = TrainingConfig(task="orpo", beta=0.05)
    for config in (dpo, kto, orpo):
        assert TrainingConfig(**config.to_json_dict()) == config


@pytest.mark.parametrize(
    ("keys", "blamed"),
    [
        ({"beta": 0.3}, "[beta] beta applies to task dpo or orpo or kto only, not to task sft"),
        ({"task": "orpo", "reference_free": True}, "[reference_free]"),
        ({"task": "dpo", "desirable_weight": 2.0}, "[desirable_weight]"),
        ({"task": "kto", "loss_type": "hinge"}, '[loss_type] kto takes one loss_type, "kto" or "apo_zero_unpaired"'),
        ({"task": "dpo", "loss_type": ["sigmoid", "ipo"], "loss_weights": [1.0]}, "[loss_weights]"),
        ({"task": "dpo", "packing": True}, "[packing] packing applies to sft only"),
        ({"task": "orpo", "chunked_cross_entropy": True}, "[chunked_cross_entropy]"),
        ({"task": "dpo", "max_length": 128, "max_prompt_length": 128}, "[max_prompt_length]"),
        ({"task": "kto", "batch_size": 1}, "[batch_size] kto estimates its KL term"),
        ({"init_from_checkpoint": 4}, "[init_from_checkpoint] init_from_checkpoint needs init_from_job"),
    ],
)
def test_keys_that_do_not_fit_the_task_are_refused_naming_the_field(keys: dict[str, object], blamed: str) -> None:
    assert blamed in _refusal(**keys)


def test_an_unknown_dpo_loss_is_refused_by_the_schema() -> None:
    assert "loss_type" in _refusal(task="dpo", loss_type="sigmoidal")


def test_only_full_fine_tunes_with_a_reference_keep_a_frozen_copy() -> None:
    assert needs_reference_copy(TrainingConfig(task="dpo", use_peft=False))
    assert needs_reference_copy(TrainingConfig(task="kto", use_peft=False))
    assert not needs_reference_copy(TrainingConfig(task="dpo", use_peft=False, reference_free=True))
    assert not needs_reference_copy(TrainingConfig(task="orpo", use_peft=False))
    assert not needs_reference_copy(TrainingConfig(task="dpo"))
    assert not needs_reference_copy(TrainingConfig(task="sft", use_peft=False))


def test_every_preference_key_is_a_config_key() -> None:
    assert set(KEY_TASKS) <= set(TrainingConfig.model_fields)
