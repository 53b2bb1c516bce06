"""The job config contract: defaults, fragments, recipes and field-named errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tunedeck.cli.main import app
from tunedeck.config.derived import derive_values
from tunedeck.config.loading import (
    apply_overrides,
    check_config,
    config_schema,
    load_config_file,
    validate_config,
)
from tunedeck.config.recipes import batch_and_speed_keys, get_recipe, list_recipes
from tunedeck.config.training import CONTRACT_KEYS, TrainingConfig
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


def test_defaults_are_the_first_seed_example_with_the_precision_of_the_hardware() -> None:
    config = TrainingConfig()
    for key, value in SEED_FIRST_EXAMPLE.items():
        if key not in ("mixed_precision", "gradient_checkpointing"):
            assert getattr(config, key) == value, key
    # The example's bf16 is what "auto" resolves to where the hardware has it; elsewhere a blank config still runs.
    assert config.mixed_precision == "auto"
    # Its true is what "auto" resolves to where the step does not fit without it; elsewhere it is off, and faster.
    assert config.gradient_checkpointing == "auto"
    assert TrainingConfig.model_validate(SEED_FIRST_EXAMPLE).gradient_checkpointing is True  # written true stays true


def test_every_seed_key_is_a_field() -> None:
    assert set(CONTRACT_KEYS) <= set(TrainingConfig.model_fields)
    assert len(CONTRACT_KEYS) == 26


@pytest.mark.parametrize("fragment", SEED_FRAGMENTS)
def test_seed_fragments_validate_unchanged(fragment: dict[str, object]) -> None:
    config = validate_config(fragment)
    for key, value in fragment.items():
        assert getattr(config, key) == value


RECIPE_DIR = Path(__file__).resolve().parents[3] / "tunedeck" / "config" / "recipes"


def test_every_shipped_recipe_validates() -> None:
    shipped = sorted(path.stem for path in RECIPE_DIR.glob("*.json"))
    listed = [recipe.name for recipe in list_recipes()]
    contract = ["instruction-tuning-lora", "full-finetune-small", "quick-experiment"]  # the contract's order
    assert listed == [*contract, "dpo-lora", "orpo-lora", "kto-lora"]
    assert sorted(listed) == shipped  # no file shipped without being listed, none listed without a file
    for path in RECIPE_DIR.glob("*.json"):
        values = json.loads(path.read_text(encoding="utf-8"))
        config = load_config_file(path)
        for key, value in values.items():
            assert getattr(config, key) == value, (path.name, key)
        assert get_recipe(path.stem).values == values


@pytest.mark.parametrize("task", ["dpo", "orpo", "kto"])
def test_each_preference_task_has_a_lora_recipe_with_a_gentle_learning_rate(task: str) -> None:
    config = get_recipe(f"{task}-lora").config()
    assert config.task == task and config.use_peft and config.peft_method == "lora"
    assert config.beta == 0.1 and config.epochs <= 3
    # A preference loss moves a model far faster than the sft loss: a tenth of instruction tuning's rate or less.
    assert 5e-6 <= config.learning_rate <= get_recipe("instruction-tuning-lora").config().learning_rate / 10
    assert config.max_prompt_length is not None and config.max_prompt_length < config.max_length


def test_quick_experiment_recipe_is_the_contract_with_its_batch_and_speed_stated() -> None:
    assert get_recipe("quick-experiment").values == {
        "epochs": 1,
        "batch_size": 8,
        "gradient_accumulation_steps": 1,
        "learning_rate": 5e-5,
        "max_length": 256,
        "packing": "auto",
        "mixed_precision": "auto",
        "gradient_checkpointing": False,
        "use_peft": False,
        "save_strategy": "no",
        "logging_steps": 1,
    }


@pytest.mark.parametrize("path", sorted(RECIPE_DIR.glob("*.json")), ids=lambda path: path.stem)
def test_every_recipe_states_the_keys_that_set_its_effective_batch_and_speed(path: Path) -> None:
    values = json.loads(path.read_text(encoding="utf-8"))
    config = get_recipe(path.stem).config()
    required = batch_and_speed_keys(config.task)
    assert {"batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "max_length"} <= set(required)
    assert ("packing" in required) == (config.task == "sft")  # packing is sft's alone
    missing = [key for key in required if key not in values]
    assert not missing, f"{path.name} leaves {missing} to the defaults"
    for key in required:
        assert config.user_set(key) and getattr(config, key) == values[key], (path.name, key)


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
    # Written by the user at the default value is still a contradiction.
    ({"save_strategy": "no", "save_steps": 500}, "save_steps", 'save_strategy is "no"'),
    ({"eval_strategy": "no", "eval_steps": 250}, "eval_steps", 'eval_strategy is "no"'),
    ({"use_peft": False, "peft_method": "qlora"}, "peft_method", "needs use_peft"),
    ({"optim": "sgd"}, "optim", "'adamw', 'adamw_8bit', 'paged_adamw_8bit' or 'adafactor'"),
    ({"truncation": "left"}, "truncation", "'refuse', 'drop' or 'truncate_prompt'"),
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
    fragments = [{"eval_strategy": "no"}, {"save_strategy": "no"}, {"save_strategy": "no", "eval_strategy": "no"}]
    for data in [*fragments, *SEED_FRAGMENTS, *(recipe.values for recipe in list_recipes())]:
        config = validate_config(data)
        assert validate_config(config.to_json_dict()) == config


def test_a_dump_from_before_newer_keys_still_revalidates() -> None:
    # A job stored by an older tunedeck lacks the keys added since; the seed keys are all there.
    dump = validate_config({"save_strategy": "no"}).to_json_dict()
    for newer in ("torch_compile", "chunked_cross_entropy", "auto_reduce_batch_on_oom", "preflight"):
        dump.pop(newer)
    assert validate_config(dump).save_strategy == "no"


def test_a_changed_dump_is_still_checked() -> None:
    # What a clone does: the stored dump plus the user's changes.
    dump = validate_config({}).to_json_dict()
    assert validate_config({**dump, "save_strategy": "no"}).save_strategy == "no"
    with pytest.raises(ConfigError) as caught:
        validate_config({**dump, "save_strategy": "no", "save_steps": 100})
    assert [issue.field for issue in caught.value.issues] == ["save_steps"]


def test_constant_schedule_with_warmup_warns_and_points_to_constant_with_warmup() -> None:
    check = check_config({"lr_scheduler": "constant", "warmup_ratio": 0.1})
    assert [issue.field for issue in check.warnings] == ["warmup_ratio"]
    message = check.warnings[0].render()
    assert "ignored" in message and '"constant_with_warmup"' in message
    assert derive_values(check.config, 100).warmup_steps == 0  # "constant" stays constant
    assert check_config({"lr_scheduler": "constant"}).warnings == []  # warmup_ratio left at its default
    assert check_config({"lr_scheduler": "constant", "warmup_ratio": 0.0}).warnings == []
    assert check_config({"lr_scheduler": "constant_with_warmup", "warmup_ratio": 0.1}).warnings == []


def test_overrides_revalidate() -> None:
    base = validate_config({"batch_size": 2})
    assert apply_overrides(base, {"lora_r": 8}).lora_r == 8
    with pytest.raises(ConfigError):
        apply_overrides(base, {"lora_r": 0})


def test_schema_lists_every_key_with_enums() -> None:
    schema = config_schema()
    assert set(CONTRACT_KEYS) <= set(schema["properties"])
    assert json.dumps(schema)  # serialisable as shipped
    assert schema["properties"]["lr_scheduler"]["enum"] == [
        "linear",
        "cosine",
        "polynomial",
        "constant",
        "constant_with_warmup",
    ]
    assert schema["properties"]["truncation"]["enum"] == ["refuse", "drop", "truncate_prompt"]
    assert schema["properties"]["truncation"]["default"] == "refuse"


# --- the `tunedeck config` commands ---

runner = CliRunner()


def _cli(*args: str) -> Result:
    return runner.invoke(app, ["config", *args])


def test_cli_validate_accepts_a_valid_file(tmp_path: Path) -> None:
    file = tmp_path / "job.json"
    file.write_text(json.dumps({"batch_size": 4, "gradient_accumulation_steps": 8}))
    result = _cli("validate", str(file))
    assert result.exit_code == 0, result.output
    assert "valid" in result.output and "warning" not in result.output
    assert '"gradient_accumulation_steps": 8' in result.output


def test_cli_validate_refuses_an_invalid_file_naming_each_field(tmp_path: Path) -> None:
    file = tmp_path / "job.json"
    file.write_text(json.dumps({"batch_sise": 4, "lora_r": 0}))
    result = _cli("validate", str(file))
    assert result.exit_code != 0
    assert 'batch_sise: unknown key "batch_sise"; did you mean "batch_size"?' in result.output
    assert "lora_r: out of range" in result.output
    assert str(file) in result.output
    assert "Traceback" not in result.output
    # Contradictions are checked once every field is valid on its own.
    file.write_text(json.dumps({"save_strategy": "no", "save_steps": 500}))
    result = _cli("validate", str(file))
    assert result.exit_code != 0
    assert 'save_steps: save_steps is set but save_strategy is "no"' in result.output


def test_cli_validate_prints_warnings_and_still_passes(tmp_path: Path) -> None:
    file = tmp_path / "job.json"
    file.write_text(json.dumps({"lr_scheduler": "constant", "warmup_ratio": 0.1}))
    result = _cli("validate", str(file))
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "constant_with_warmup" in result.output


def test_cli_validate_reports_a_missing_file(tmp_path: Path) -> None:
    result = _cli("validate", str(tmp_path / "absent.json"))
    assert result.exit_code != 0 and "config file not found" in result.output


def test_cli_schema_prints_the_json_schema() -> None:
    result = _cli("schema")
    assert result.exit_code == 0
    assert json.loads(result.output) == config_schema()


def test_cli_recipes_lists_every_shipped_recipe() -> None:
    result = _cli("recipes")
    assert result.exit_code == 0
    for path in RECIPE_DIR.glob("*.json"):
        assert path.stem in result.output


def test_cli_lists_the_preference_tasks_keys_and_recipes() -> None:
    printed = json.loads(_cli("schema").output)["properties"]
    assert printed["task"]["enum"] == ["sft", "classification", "dpo", "orpo", "kto"]
    for key in ("beta", "loss_type", "loss_weights", "max_prompt_length", "reference_free", "desirable_weight"):
        assert printed[key]["description"], key
    listed = _cli("recipes").output
    assert all(name in listed for name in ("dpo-lora", "orpo-lora", "kto-lora"))
    assert json.loads(_cli("show", "kto-lora").output)["loss_type"] == "kto"


def test_cli_show_prints_a_recipe_verbatim() -> None:
    result = _cli("show", "quick-experiment")
    assert result.exit_code == 0
    assert json.loads(result.output) == json.loads((RECIPE_DIR / "quick-experiment.json").read_text())


def test_cli_show_an_unknown_recipe_names_the_valid_ones() -> None:
    result = _cli("show", "no-such-recipe")
    assert result.exit_code != 0
    assert 'unknown recipe "no-such-recipe"' in result.output
    assert "quick-experiment" in result.output


# --- eval_generation_each_eval ---


def test_generation_each_eval_is_off_by_default_and_described_in_the_schema() -> None:
    assert validate_config({}).eval_generation_each_eval is False
    described = config_schema()["properties"]["eval_generation_each_eval"]
    assert described["type"] == "boolean" and described["default"] is False
    assert "eval_gen_exact_match" in described["description"]
    result = _cli("schema")
    assert result.exit_code == 0 and "eval_generation_each_eval" in json.loads(result.output)["properties"]


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"eval_generation_each_eval": True, "eval_strategy": "no"}, "eval_generation_each_eval", "needs evaluation"),
        ({"metric_for_best_model": "gen_token_f1"}, "metric_for_best_model", "eval_generation_each_eval: true"),
        ({"metric_for_best_model": "eval_gen_exact_match"}, "metric_for_best_model", "eval_generation_each_eval"),
    ],
)
def test_generation_each_eval_contradictions_name_the_field(data: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    assert field in [issue.field for issue in caught.value.issues]
    assert fragment in str(caught.value)


def test_a_generation_metric_ranks_checkpoints_when_reported() -> None:
    config = validate_config({"eval_generation_each_eval": True, "metric_for_best_model": "gen_token_f1"})
    assert config.greater_is_better
    assert validate_config(config.to_json_dict()) == config


def test_schedule_warnings_need_the_training_set_size(tmp_path: Path) -> None:
    from tunedeck.config.config_warnings import FEW_STEPS, config_warnings

    config = validate_config({"epochs": 1, "batch_size": 4, "gradient_accumulation_steps": 1, "warmup_ratio": 0.1})
    assert config_warnings(config) == []  # no size: nothing to say about steps
    # 4 rows: one step, far fewer than FEW_STEPS; it is not warmup (that would train at a learning rate of 0).
    one_step = config_warnings(config, train_examples=4)
    assert [w.field for w in one_step] == ["epochs"]
    assert "only 1 optimizer step" in one_step[0].message
    # 12 rows at warmup 0.5: 2 of the 3 steps warm up, so the rate peaks only late.
    mostly_warmup = config_warnings(config.model_copy(update={"warmup_ratio": 0.5}), train_examples=12)
    assert [w.field for w in mostly_warmup] == ["warmup_ratio", "epochs"]
    assert "2 of the 3 step(s) are warmup" in mostly_warmup[0].message
    # Enough rows for FEW_STEPS steps: nothing to warn about.
    assert config_warnings(config, train_examples=4 * FEW_STEPS) == []
    # Two processes take twice the rows per step.
    two = validate_config({"epochs": 1, "batch_size": 4, "gradient_accumulation_steps": 1, "devices": 0, "processes": 2,
                           "warmup_ratio": 0.0})
    assert [w.field for w in config_warnings(two, train_examples=8 * (FEW_STEPS - 1))] == ["epochs"]
    assert config_warnings(two, train_examples=8 * FEW_STEPS) == []

    file = tmp_path / "config.json"
    file.write_text(json.dumps({"epochs": 1, "batch_size": 4}), encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "validate", str(file), "--examples", "4"])
    assert result.exit_code == 0 and "only 1 optimizer step" in result.output and "are warmup" not in result.output


@pytest.mark.parametrize(
    ("total", "ratio", "warmup"),
    [(1, 0.1, 0), (1, 0.99, 0), (2, 0.1, 1), (10, 0.1, 1), (10, 0.5, 5), (3, 0.9, 2), (100, 0.05, 5)],
)
def test_the_warmup_rounds_up_but_always_leaves_a_step_at_the_peak_rate(total: int, ratio: float, warmup: int) -> None:
    from tunedeck.config.derived import warmup_steps_for

    assert warmup_steps_for(ratio, total) == warmup


def test_the_quick_recipe_on_a_small_file_trains_every_step_but_the_first_at_a_real_rate() -> None:
    from tunedeck.config.derived import derive_values, schedule_refusals, steps_at_zero_rate

    config = get_recipe("quick-experiment").config()
    derived = derive_values(config, 32)
    assert (derived.effective_batch_size, derived.total_steps) == (8, 4)
    assert steps_at_zero_rate(derived) == 1 and schedule_refusals(config, derived) == []
    # A single step has no warmup at all, so it trains at the peak rate.
    single = derive_values(config, 8)
    assert (single.total_steps, single.warmup_steps, steps_at_zero_rate(single)) == (1, 0, 0)


def test_a_schedule_that_would_not_train_is_refused_with_what_to_change() -> None:
    from tunedeck.config.derived import DerivedValues, schedule_refusals

    config = validate_config({"epochs": 1, "warmup_ratio": 0.5})
    all_zero = schedule_refusals(config, DerivedValues(16, 4, 1, 1, 1))
    assert [issue.field for issue in all_zero] == ["warmup_ratio"]
    assert "every one of the 1 optimizer step(s) would run at learning rate 0" in all_zero[0].message
    none = schedule_refusals(config, DerivedValues(16, 0, 0, 0, 0))
    assert none[0].message == "the run would make 0 optimizer steps" and "more data" in str(none[0].expected)
