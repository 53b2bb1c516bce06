"""Which bases match a pin, what the refusal says, and the engine process's answer to a refused spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.core.errors import ModelLoadError, NotFoundError
from tunedeck.engine.models.model_source import ResolvedModel
from tunedeck.engine.models.pinning import BaseModelMismatchError, BasePin, base_mismatches, check_base
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.worker.engine_process import EngineRefusedError, run_engine_module

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _hub(commit: str) -> ResolvedModel:
    return ResolvedModel(Path("/snapshots") / commit, "hub", "org/model", commit, None)


def test_hub_pins_compare_commits_and_name_both() -> None:
    pin = BasePin("org/model", "hub", COMMIT_A, None, None)
    assert base_mismatches(pin, _hub(COMMIT_A), what="the adapter") == []
    (problem,) = base_mismatches(pin, _hub(COMMIT_B), what="the adapter")
    assert COMMIT_A in problem and COMMIT_B in problem
    with pytest.raises(BaseModelMismatchError, match="allow_mismatch"):
        check_base(pin, _hub(COMMIT_B), what="the adapter")
    with pytest.warns(UserWarning, match="base model mismatch"):
        assert check_base(pin, _hub(COMMIT_B), what="the adapter", allow_mismatch=True) == [problem]


def test_a_local_folder_cannot_stand_in_for_a_hub_commit() -> None:
    pin = BasePin("org/model", "hub", COMMIT_A, None, None)
    local = ResolvedModel(Path("/models/copy"), "local", "/models/copy", None, "c" * 64)
    (problem,) = base_mismatches(pin, local, what="the adapter")
    assert f"commit {COMMIT_A}" in problem and "c" * 64 in problem
    assert base_mismatches(None, local, what="the adapter")[0].startswith("the adapter records no base model")


def test_pin_documents_are_checked() -> None:
    pin = BasePin("/models/base", "local", None, "d" * 64, "e" * 64)
    assert BasePin.from_dict(pin.to_dict()) == pin
    with pytest.raises(ModelLoadError, match="not a tunedeck pin"):
        BasePin.from_dict({"model_id": "x"})


def test_export_names_are_validated() -> None:
    assert export_prefix("u1", "job_1", "merged-step-40") == "users/u1/jobs/job_1/exports/merged-step-40"
    for bad in ("../final", "adapter-latest", "zip-final"):
        with pytest.raises(NotFoundError):
            export_prefix("u1", "job_1", bad)


def test_engine_process_reports_a_refusal_with_its_issues(tmp_path: Path) -> None:
    spec = {"format": "zip", "model_dir": str(tmp_path), "out": str(tmp_path / "out")}
    with pytest.raises(EngineRefusedError) as refused:
        run_engine_module("export", spec, tmp_path / "work", timeout_s=120)
    assert refused.value.issues[0].field == "--format" and refused.value.kind == "ConfigError"
    assert json.loads((tmp_path / "work" / "export-spec.json").read_text())["format"] == "zip"
    with pytest.raises(ValueError):
        run_engine_module("child", spec, tmp_path, timeout_s=1)
