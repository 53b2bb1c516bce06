"""An extraction job's `output_schema` reaches its evaluation: schema validity and the schema's required fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.data import EXTRACTION_ROWS, EXTRACTION_SCHEMA, write_jsonl
from tests.integration.engine.engine_data import fast_config
from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def test_baseline_and_final_evaluations_check_answers_against_the_schema(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", EXTRACTION_ROWS * 4)
    validation = write_jsonl(tmp_path / "validation.jsonl", EXTRACTION_ROWS)
    schema = {**EXTRACTION_SCHEMA, "required": ["vendor", "total"]}
    config = fast_config(epochs=1, batch_size=4, output_schema=schema, max_length=96)
    run_dir = tmp_path / "run"
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, run_dir, validation_path=validation))
    assert result.status == "succeeded"
    for name in ("baseline_eval.json", "final_eval.json"):
        document = json.loads((run_dir / name).read_text())
        assert document["procedure"]["json_schema"] == schema
        assert document["procedure"]["required_fields"] == ["vendor", "total"]  # the schema's, not all keys
        rate = document["metrics"]["schema_valid_rate"]
        assert 0.0 <= rate <= document["metrics"]["json_valid_rate"]  # an answer valid by schema is valid JSON


def test_an_invalid_output_schema_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config({"output_schema": {"type": "not-a-type"}})
    assert [issue.field for issue in caught.value.issues] == ["output_schema"]
    assert "not a valid JSON Schema" in caught.value.issues[0].message
