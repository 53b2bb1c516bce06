"""Resuming into a run directory: the stored config must match, keys added since then by their defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError
from tunedeck.core.rundir import RunDir
from tunedeck.engine.training.run_directory import check_resume_config


def _run_dir(tmp_path: Path, stored: dict[str, object]) -> RunDir:
    run_dir = RunDir(tmp_path)
    run_dir.config.write_text(json.dumps({"config": stored}), encoding="utf-8")
    return run_dir


def test_same_config_resumes_and_a_changed_key_is_named(tmp_path: Path) -> None:
    config = TrainingConfig(epochs=2).to_json_dict()
    run_dir = _run_dir(tmp_path, config)
    check_resume_config(run_dir, config)
    with pytest.raises(ConfigError) as raised:
        check_resume_config(run_dir, {**config, "learning_rate": 1e-3})
    (issue,) = raised.value.issues
    assert issue.field == "learning_rate" and issue.file == str(run_dir.config)


def test_a_key_added_since_the_run_started_resumes_at_its_default(tmp_path: Path) -> None:
    config = TrainingConfig(epochs=2).to_json_dict()
    older = {key: value for key, value in config.items() if key != "eval_max_new_tokens"}
    run_dir = _run_dir(tmp_path, older)
    check_resume_config(run_dir, config)  # the run trained with the default: nothing changed
    with pytest.raises(ConfigError) as raised:
        check_resume_config(run_dir, {**config, "eval_max_new_tokens": 16})
    (issue,) = raised.value.issues
    assert issue.field == "eval_max_new_tokens"
    assert issue.expected == "128" and issue.found == "16"
