"""A resumed run is checked again before training when its platform changed, and only then."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preflight_data import chat_spec
from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.engine.distributed.ranks import Ranks
from tunedeck.engine.host.environment import capture_environment
from tunedeck.engine.host.hardware import cpu_profile
from tunedeck.engine.preflight import PreflightFailedError, PreflightReport
from tunedeck.engine.preflight import platform_change as platform
from tunedeck.engine.preflight.before_training import checks_before_training
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.run_spec import RunSpec


def _resumed_run(model: Path, folder: Path, **config: Any) -> RunSpec:
    """A run folder whose env.json records this machine's platform, and a spec resuming it."""
    spec = chat_spec(model, folder, rows=4, **config)
    spec.out_dir.mkdir(parents=True)
    write_json_atomic(spec.out_dir / "config.json", {"config": spec.config.to_json_dict()})
    write_json_atomic(spec.out_dir / "env.json", capture_environment(cpu_profile()))
    checkpoint = spec.out_dir / "checkpoints" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    return dataclasses.replace(spec, resume_from=checkpoint)


def _resumed_elsewhere(model: Path, folder: Path) -> RunSpec:
    """A job resumed on another worker: a new, empty run folder, and a checkpoint carrying the run's env.json."""
    spec = chat_spec(model, folder / "attempt-2" / "run", rows=4)
    checkpoint = folder / "attempt-2" / "resume" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    write_json_atomic(checkpoint / "tunedeck_env.json", capture_environment(cpu_profile()))
    return dataclasses.replace(spec, resume_from=checkpoint)


def _count_preflights(monkeypatch: pytest.MonkeyPatch, status: str = "pass") -> list[RunSpec]:
    from tunedeck.engine.preflight import runner

    calls: list[RunSpec] = []

    def fake_run_preflight(spec: RunSpec, **kwargs: Any) -> PreflightReport:
        calls.append(spec)
        return PreflightReport(checks=[CheckResult(1, status, "checked")], hardware={})  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "run_preflight", fake_run_preflight)
    return calls


def _upgraded_torch(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    recorded = platform.environment_fingerprint(cpu_profile())
    upgraded = {**recorded, "torch": "2.14.1"}
    monkeypatch.setattr(platform, "environment_fingerprint", lambda hardware: upgraded)
    return {"recorded": recorded, "now": upgraded}


def test_the_change_names_each_key_that_differs() -> None:
    before = {"device_type": "cuda", "device_name": "A100", "torch": "2.13.0", "cuda": "12.8", "driver": "570"}
    after = {**before, "device_name": "H100", "torch": "2.14.1"}
    assert platform.platform_change(before, after) == "platform changed: device A100 → H100, torch 2.13.0 → 2.14.1"
    assert platform.platform_change(before, dict(before)) is None


def test_a_resume_on_the_same_platform_is_not_checked_again(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_preflights(monkeypatch)
    spec = _resumed_run(tiny_llama_dir, tmp_path)
    assert checks_before_training(spec, Ranks()) == (spec, None)
    assert calls == [] and not (spec.out_dir / "preflight.json").exists()


def test_a_resume_on_a_changed_platform_is_checked_again_and_records_why(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_preflights(monkeypatch)
    spec = _resumed_run(tiny_llama_dir, tmp_path)
    versions = _upgraded_torch(monkeypatch)
    reason = f"platform changed: torch {versions['recorded']['torch']} → 2.14.1"

    trained, report = checks_before_training(spec, Ranks())
    assert len(calls) == 1 and trained == spec  # a resumed run keeps its config
    assert report is not None and report["reason"] == reason
    kept = json.loads((spec.out_dir / "preflight.json").read_text(encoding="utf-8"))
    assert kept["reason"] == reason and kept["status"] == "pass"
    env = json.loads((spec.out_dir / "env.json").read_text(encoding="utf-8"))
    assert env["fingerprint"] == versions["now"]
    assert env["platform_changes"] == [{"from": versions["recorded"], "to": versions["now"], "reason": reason}]

    # Resumed again on the new platform: nothing changed since the re-check.
    assert checks_before_training(spec, Ranks()) == (spec, None)
    assert len(calls) == 1


def test_a_failed_recheck_refuses_the_resume_and_keeps_the_platform_recorded(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _count_preflights(monkeypatch, status="fail")
    spec = _resumed_run(tiny_llama_dir, tmp_path)
    versions = _upgraded_torch(monkeypatch)
    with pytest.raises(PreflightFailedError):
        checks_before_training(spec, Ranks())
    kept = json.loads((spec.out_dir / "preflight.json").read_text(encoding="utf-8"))
    assert kept["status"] == "fail" and kept["reason"].startswith("platform changed: torch")
    env = json.loads((spec.out_dir / "env.json").read_text(encoding="utf-8"))
    assert env["fingerprint"] == versions["recorded"]  # the next resume is checked again


def test_preflight_false_skips_the_recheck_too(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_preflights(monkeypatch)
    spec = _resumed_run(tiny_llama_dir, tmp_path, preflight=False)
    _upgraded_torch(monkeypatch)
    assert checks_before_training(spec, Ranks()) == (spec, None) and calls == []


def test_a_job_resumed_on_another_worker_compares_with_the_checkpoints_platform(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_preflights(monkeypatch)
    spec = _resumed_elsewhere(tiny_llama_dir, tmp_path)
    assert checks_before_training(spec, Ranks()) == (spec, None) and calls == []  # same platform

    versions = _upgraded_torch(monkeypatch)
    trained, report = checks_before_training(spec, Ranks())
    assert len(calls) == 1 and trained == spec
    assert (
        report is not None and report["reason"] == f"platform changed: torch {versions['recorded']['torch']} → 2.14.1"
    )
    # The new folder is left for the run directory, which keeps this report as preflight.json.
    assert not spec.out_dir.exists()
