"""The seed 002 config contract: defaults, fragments, recipes and field-named errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.config.loading import apply_overrides, config_schema, load_config_file, validate_config
from tunedeck.config.recipes import get_recipe, list_recipes
from tunedeck.config.training import SEED_KEYS, TrainingConfig
from tunedeck.core.errors import ConfigError

SEED_FIRST_EXAMPLE = {
    "epochs": 3,
    "batch_size": 4,
    "learning_rate": 5e-5,
    "weight_decay": 0.01,
    "warmup_ratio": 0.1,
    "max_length": 512,
    "gradient_accumulation_steps": 4,
    "mixed_precision": "bf16",
    "gradient_checkpointing": True,
    "lr_scheduler": "cosine",
    "use_peft": True,
    "peft_method": "lora",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "save_strategy": "steps",
    "save_steps": 500,
    "eval_strategy": "steps",
    "eval_steps": 250,
    "logging_steps": 10,
    "seed": 42,
}

SEED_FRAGMENTS = [
    SEED_FIRST_EXAMPLE,
    {"batch_size": 4, "gradient_accumulation_steps": 8},
    {
        "eval_strategy": "steps",
        "eval_steps": 250,
        "validation_dataset_id": 43,
        "load_best_model_at_end": True,
        "metric_for_best_model": "eval_loss",
        "early_stopping_patience": 3,
        "early_stopping_threshold": 0.001,
    },
]


def test_defaults_are_the_first_seed_example() -> None:
    config = TrainingConfig()
    for key, value in SEED_FIRST_EXAMPLE.items():
        assert getattr(config, key) == value, key


def test_every_seed_key_is_a_field() -> None:
    assert set(SEED_KEYS) <= set(TrainingConfig.model_fields)
    assert len(SEED_KEYS) == 26


@pytest.mark.parametrize("fragment", SEED_FRAGMENTS)
def test_seed_fragments_validate_unchanged(fragment: dict[str, object]) -> None:
    config = validate_config(fragment)
    for key, value in fragment.items():
        assert getattr(config, key) == value


def test_every_shipped_recipe_validates() -> None:
    names = [recipe.name for recipe in list_recipes()]
    assert names == ["instruction-tuning-lora", "full-finetune-small", "quick-experiment"]
    for recipe in list_recipes():
        config = recipe.config()
        for key, value in recipe.values.items():
            assert getattr(config, key) == value


def test_quick_experiment_recipe_is_verbatim() -> None:
    assert get_recipe("quick-experiment").values == {
        "epochs": 1,
        "batch_size": 8,
        "learning_rate": 5e-5,
        "max_length": 256,
        "mixed_precision": "auto",
        "use_peft": False,
        "save_strategy": "no",
        "logging_steps": 1,
    }


BAD_CONFIGS = [
    ({"batch_sise": 4}, "batch_sise", 'did you mean "batch_size"'),
    ({"lora_r": 0}, "lora_r", "valid range 1 to 1024"),
    ({"learning_rate": 0}, "learning_rate", "greater than 0"),
    ({"warmup_ratio": 1.5}, "warmup_ratio", "less than 1"),
    ({"mixed_precision": "fp8"}, "mixed_precision", "'bf16', 'fp16', 'fp32' or 'auto'"),
    ({"lr_scheduler": "step"}, "lr_scheduler", "cosine"),
    ({"save_strategy": "sometimes"}, "save_strategy", "'steps', 'epoch' or 'no'"),
    ({"epochs": "three"}, "epochs", "valid integer"),
    ({"early_stopping_patience": 3, "eval_strategy": "no"}, "early_stopping_patience", "needs evaluation"),
    ({"load_best_model_at_end": True, "eval_strategy": "no"}, "load_best_model_at_end", "needs eval_strategy"),
    (
        {"load_best_model_at_end": True, "save_strategy": "epoch", "eval_strategy": "steps"},
        "load_best_model_at_end",
        "save_strategy equal to eval_strategy",
    ),
    (
        {"load_best_model_at_end": True, "save_steps": 300, "eval_steps": 250},
        "save_steps",
        "multiple of eval_steps",
    ),
    ({"save_strategy": "no", "save_steps": 100}, "save_steps", 'save_strategy is "no"'),
    ({"use_peft": False, "peft_method": "qlora"}, "peft_method", "needs use_peft"),
]


@pytest.mark.parametrize(("data", "field", "fragment"), BAD_CONFIGS)
def test_bad_configs_name_the_field(data: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    fields = [issue.field for issue in caught.value.issues]
    assert field in fields
    assert fragment in str(caught.value)


def test_all_problems_reported_together() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config({"batch_sise": 4, "lora_r": -1})
    assert {issue.field for issue in caught.value.issues} == {"batch_sise", "lora_r"}


def test_config_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "job.json"
    broken.write_text('{\n  "epochs": 3,\n  "batch_size": \n}\n')
    with pytest.raises(ConfigError) as caught:
        load_config_file(broken)
    issue = caught.value.issues[0]
    assert issue.file == str(broken)
    assert issue.line == 4


def test_full_dump_of_a_valid_config_revalidates() -> None:
    for data in [{"eval_strategy": "no"}, {"save_strategy": "no"}, *SEED_FRAGMENTS]:
        config = validate_config(data)
        assert validate_config(config.to_json_dict()) == config


def test_overrides_revalidate() -> None:
    base = validate_config({"batch_size": 2})
    assert apply_overrides(base, {"lora_r": 8}).lora_r == 8
    with pytest.raises(ConfigError):
        apply_overrides(base, {"lora_r": 0})


def test_schema_lists_every_key_with_enums() -> None:
    schema = config_schema()
    assert set(SEED_KEYS) <= set(schema["properties"])
    assert json.dumps(schema)  # serialisable as shipped
    assert schema["properties"]["lr_scheduler"]["enum"] == [
        "linear",
        "cosine",
        "polynomial",
        "constant",
        "constant_with_warmup",
    ]
