"""`TunedeckTrainer` overrides private Trainer hooks: they must still exist, called as it calls them.

A failure here means transformers changed what the fast paths override: re-check each override
in `tunedeck/engine/training/trainer.py` against the new Trainer before widening the pinned range.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

pytest.importorskip("torch")

UPGRADE_HINT = "re-check the override in tunedeck/engine/training/trainer.py on a transformers upgrade"


def test_the_overridden_hooks_exist_with_the_parameters_the_overrides_use() -> None:
    from transformers import Trainer

    from tunedeck.engine.training.trainer import OVERRIDDEN_HOOKS

    for hook, parameters in OVERRIDDEN_HOOKS.items():
        method = getattr(Trainer, hook, None)
        assert callable(method), f"transformers.Trainer.{hook} is gone: {UPGRADE_HINT}"
        found = list(inspect.signature(method).parameters)[1:]  # without self
        assert found[: len(parameters)] == list(parameters), (
            f"transformers.Trainer.{hook} now takes {found}, the override calls it with {list(parameters)}: "
            f"{UPGRADE_HINT}"
        )


def test_the_class_overrides_exactly_the_listed_hooks() -> None:
    from transformers import Trainer

    from tunedeck.engine.training.trainer import OVERRIDDEN_HOOKS, TunedeckTrainer

    overridden = {
        name for name, value in vars(TunedeckTrainer).items()
        if callable(value) and name != "__init__" and hasattr(Trainer, name)
    }
    assert overridden == set(OVERRIDDEN_HOOKS), "OVERRIDDEN_HOOKS must list every Trainer method the class overrides"


def test_the_attributes_the_overrides_read_exist_on_a_built_trainer(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, TrainingArguments

    from tunedeck.engine.training.trainer import READ_ATTRIBUTES, TunedeckTrainer

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = TunedeckTrainer(model=model, args=args, count_tokens_on_host=True, chunked_loss=True)
    for dotted in READ_ATTRIBUTES:
        owner: object = trainer
        for part in dotted.split("."):
            assert hasattr(owner, part), f"a transformers Trainer no longer has `{dotted}`: {UPGRADE_HINT}"
            owner = getattr(owner, part)
    # The host count is skipped when the setting is "no": a switched-off count must still read so.
    off = TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", include_num_input_tokens_seen=False
    )
    assert off.include_num_input_tokens_seen == "no", (
        f"args.include_num_input_tokens_seen no longer says 'no' when off: {UPGRADE_HINT}"
    )
