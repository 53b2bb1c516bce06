"""Preflight as a job's first phase: a refused job keeps every check's figures; the memory cap setting applies."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preflight_data import chat_spec
from tunedeck.core.errors import ConfigError
from tunedeck.core.events import read_events
from tunedeck.core.exit_codes import ExitCode
from tunedeck.engine.host.hardware import cpu_profile
from tunedeck.engine.preflight import PreflightFailedError, PreflightReport, preflight_for_run
from tunedeck.engine.preflight.memory_cap import MEMORY_CAP_ENV, memory_cap_bytes, parse_size
from tunedeck.engine.preflight.phase import write_failed_preflight
from tunedeck.engine.preflight.report import CheckResult

QLORA_ON_CPU: dict[str, Any] = {"use_peft": True, "peft_method": "qlora"}


def test_a_job_refused_by_preflight_keeps_preflight_json_for_the_worker(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the engine child, as the worker runs it: exit 2 (refused), and the record left behind."""
    from tunedeck.engine import child

    monkeypatch.delenv(MEMORY_CAP_ENV, raising=False)
    spec = chat_spec(tiny_llama_dir, tmp_path, **QLORA_ON_CPU)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")

    assert child.main(["--spec", str(spec_file)]) == ExitCode.REFUSED

    report = json.loads((spec.out_dir / "preflight.json").read_text(encoding="utf-8"))
    assert [check["number"] for check in report["checks"]] == [*range(1, 9), 10, 11]
    stack = report["checks"][0]
    assert stack["status"] == "fail" and "qlora" in stack["message"]
    assert stack["figures"]["backend"] == "cpu" and stack["advice"]
    assert report["checks"][2]["figures"]["examples"]  # checks that could run kept their figures
    events = read_events(spec.out_dir / "events.jsonl")
    phase = next(event for event in events if event["type"] == "phase")
    assert (phase["name"], phase["status"]) == ("preflight", "failed") and "stack" in phase["failed"]
    assert events[-1]["type"] == "diagnosis" and "preflight failed" in events[-1]["message"]
    assert not (spec.out_dir / "config.json").exists()  # refused before training: no run started


def test_the_failure_record_never_touches_a_folder_holding_another_run(tmp_path: Path) -> None:
    report = PreflightReport(checks=[CheckResult(1, "fail", "no")], hardware={})
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "config.json").write_text("{}")
    assert write_failed_preflight(busy, report) is False
    assert sorted(path.name for path in busy.iterdir()) == ["config.json"]
    waiting = tmp_path / "waiting"
    waiting.mkdir()
    (waiting / "STOP").write_text("cancel")  # a stop request sent before the run began
    assert write_failed_preflight(waiting, report) is True
    assert (waiting / "preflight.json").is_file() and (waiting / "STOP").is_file()


def _passing_report() -> PreflightReport:
    return PreflightReport(checks=[CheckResult(1, "pass", "ok")], hardware={})


def test_the_job_preflight_reads_the_memory_cap_setting(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.engine.preflight import runner

    seen: list[int | None] = []

    def fake_run_preflight(spec: Any, **kwargs: Any) -> PreflightReport:
        seen.append(kwargs.get("memory_cap_bytes"))
        return _passing_report()

    monkeypatch.setattr(runner, "run_preflight", fake_run_preflight)
    spec = chat_spec(tiny_llama_dir, tmp_path)
    # The setting reaches the run in its spec (the worker and `tunedeck train` write it there).
    capped = dataclasses.replace(spec, memory_cap="24GiB")
    preflight_for_run(capped)
    preflight_for_run(capped, memory_cap_bytes=123)  # an explicit cap wins over the setting
    preflight_for_run(spec)
    assert seen == [24 * 2**30, 123, None]
    with pytest.raises(ConfigError) as caught:
        preflight_for_run(dataclasses.replace(spec, memory_cap="lots"))
    assert caught.value.issues[0].field == MEMORY_CAP_ENV


@pytest.mark.slow
def test_a_simulated_cap_too_small_for_one_example_refuses_the_job_with_the_fit_recorded(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = dataclasses.replace(chat_spec(tiny_llama_dir, tmp_path), memory_cap="64KiB")
    with pytest.raises(PreflightFailedError) as caught:
        preflight_for_run(spec, hardware=cpu_profile(), only={1, 2, 3, 4})
    assert caught.value.report.check("full_step").status == "fail"
    kept = json.loads((spec.out_dir / "preflight.json").read_text(encoding="utf-8"))
    assert kept["memory_fit"]["cap_source"] == "simulated" and kept["memory_fit"]["cap_bytes"] == 64 * 2**10


def test_sizes_parse_like_the_cli() -> None:
    assert parse_size("512MiB") == 512 * 2**20 and parse_size("2g") == 2 * 2**30 and parse_size("100") == 100
    assert memory_cap_bytes(" ") is None and memory_cap_bytes(None) is None
    with pytest.raises(ValueError, match="not a size"):
        parse_size("12 parsecs")


def test_the_refusal_names_each_failure_once_and_the_checks_it_kept_from_running() -> None:
    report = PreflightReport(
        checks=[
            CheckResult(1, "fail", 'mixed_precision: "bf16" is not supported on this CPU'),
            CheckResult(2, "pass", "fits"),
            CheckResult(4, "skip", 'check 1 failed: mixed_precision: "bf16" is not supported on this CPU'),
            CheckResult(8, "skip", "needs the loaded model (check 4): an earlier check failed"),
        ],
        hardware={},
        model={},
        memory_fit=None,
        seconds=0.0,
    )
    message = str(PreflightFailedError(report))
    assert message.count("is not supported on this CPU") == 1
    assert message.startswith('preflight failed: 1 stack: mixed_precision: "bf16"')
    assert message.endswith("not run because of that: 4 full_step, 8 margins")
