"""The job form follows TrainingConfig's schema: every key placed once, types and bounds from the schema."""

from __future__ import annotations

from typing import Any

from tunedeck.config.loading import config_schema
from tunedeck.web.form_spec import BASIC_KEYS, build_form_spec


def test_every_schema_key_is_a_field_exactly_once() -> None:
    keys = [f.key for f in build_form_spec().fields()]
    assert sorted(keys) == sorted(config_schema()["properties"])
    assert len(keys) == len(set(keys))
    assert [f.key for f in build_form_spec().basic.fields] == list(BASIC_KEYS)


def test_fields_take_types_bounds_and_choices_from_the_schema() -> None:
    fields = {f.key: f for f in build_form_spec().fields()}
    assert fields["batch_size"].kind == "integer" and fields["batch_size"].minimum == 1
    assert fields["learning_rate"].kind == "number" and fields["learning_rate"].exclusive_minimum == 0
    assert fields["warmup_ratio"].exclusive_maximum == 1.0
    assert [value for value, _ in fields["lr_scheduler"].options] == [
        "linear", "cosine", "polynomial", "constant", "constant_with_warmup",
    ]
    assert fields["use_peft"].kind == "checkbox"
    assert fields["peft_method"].shown_when == ("use_peft", [True])
    assert fields["early_stopping_patience"].nullable
    assert fields["validation_dataset_id"].kind == "dataset"
    assert fields["lora_target_modules"].kind == "list" and fields["lora_target_modules"].list_literal == "all-linear"
    assert fields["output_schema"].kind == "json" and fields["output_schema"].nullable
    # A switch with an automatic setting is a three-way choice, "auto" (the default) first.
    assert fields["packing"].kind == "select" and fields["packing"].default == "auto"
    assert fields["packing"].options == [("auto", "auto"), ("true", "on"), ("false", "off")]
    assert fields["chunked_cross_entropy"].kind == "select" and fields["chunked_cross_entropy"].default == "auto"
    assert fields["chunked_cross_entropy"].options == fields["packing"].options


def test_a_new_config_key_appears_in_other_options() -> None:
    schema: dict[str, Any] = config_schema()
    schema["properties"]["brand_new_knob"] = {"type": "integer", "minimum": 2, "default": 3, "description": "new"}
    spec = build_form_spec(schema)
    other = spec.advanced[-1]
    assert other.id == "other"
    new = next(f for f in other.fields if f.key == "brand_new_knob")
    assert new.kind == "integer" and new.minimum == 2 and new.default == 3


def test_each_task_shows_only_its_keys_by_the_configs_own_rule() -> None:
    from tunedeck.config.preference import KEY_TASKS

    spec = build_form_spec()
    fields = {f.key: f for f in spec.fields()}
    assert [f.key for f in spec.top.fields] == ["task"]  # beside the model and data choice
    assert [value for value, _ in fields["task"].options] == ["sft", "classification", "dpo", "orpo", "kto"]
    for key, tasks in KEY_TASKS.items():
        assert fields[key].tasks == list(tasks), key
        assert fields[key] in spec.preference.fields
    for key in ("packing", "chunked_cross_entropy", "train_on_inputs"):
        assert fields[key].tasks == ["sft"], key
    assert fields["learning_rate"].tasks is None and fields["init_from_job"].tasks is None
    # loss_type: one value or several, each task offered its own values in the schema's order.
    loss = fields["loss_type"]
    assert loss.kind == "choices" and loss.task_choices["kto"] == ["kto", "apo_zero_unpaired"]
    assert loss.task_choices["dpo"][0] == "sigmoid" and "kto" not in loss.task_choices["dpo"]
    assert fields["loss_weights"].kind == "list" and fields["loss_weights"].list_item == "number"
    assert fields["loss_weights"].nullable
    assert fields["init_from_job"].kind == "job"
    assert fields["init_from_checkpoint"].kind == "integer" and fields["init_from_checkpoint"].nullable


def test_gradient_checkpointing_offers_auto_on_and_off_with_auto_by_default() -> None:
    field = next(f for f in build_form_spec().fields() if f.key == "gradient_checkpointing")
    assert field.kind == "select"
    assert field.options == [("auto", "auto"), ("true", "on"), ("false", "off")]
    assert field.default == "auto"
