"""`gradient_checkpointing: "auto"`: resolved from the fit without it, true/false verbatim, the result recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preflight_data import chat_spec
from tunedeck.config.loading import validate_config
from tunedeck.config.training import gradient_checkpointing_on
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.engine.host.hardware import cpu_profile
from tunedeck.engine.host.memory_fit import MemoryPoint, decide_micro_batch
from tunedeck.engine.preflight import full_step
from tunedeck.engine.preflight.context import PreflightContext, PreflightOptions
from tunedeck.engine.preflight.report import PreflightReport
from tunedeck.engine.training.checkpointing_choice import (
    CheckpointingChoice,
    fits_without_checkpointing,
    resolve_gradient_checkpointing,
    run_checkpointing,
    with_checkpointing,
)
from tunedeck.engine.training.diagnosis import oom_diagnosis
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.eval.config_groups import effective_config, effective_differences

GIB = 2**30


def test_auto_is_the_default_and_true_false_stay_verbatim() -> None:
    assert validate_config({}).gradient_checkpointing == "auto"
    for value in (True, False, "auto"):
        config = validate_config({"gradient_checkpointing": value})
        assert config.gradient_checkpointing == value
        assert config.to_json_dict()["gradient_checkpointing"] == value
    assert gradient_checkpointing_on(validate_config({"gradient_checkpointing": "auto"}))  # unresolved: on
    assert not gradient_checkpointing_on(validate_config({"gradient_checkpointing": False}))


@pytest.mark.parametrize("fits", [True, False, None])
def test_true_and_false_ignore_the_fit(fits: bool | None) -> None:
    assert resolve_gradient_checkpointing(True, fits).enabled is True
    assert resolve_gradient_checkpointing(False, fits).enabled is False


def test_auto_follows_the_fit_without_checkpointing() -> None:
    assert resolve_gradient_checkpointing("auto", True).enabled is False
    assert resolve_gradient_checkpointing("auto", False).enabled is True
    unmeasured = resolve_gradient_checkpointing("auto", None)
    assert unmeasured.enabled is True and "no memory measurement" in unmeasured.reason


def test_the_fit_keeps_the_step_only_at_the_configured_micro_batch() -> None:
    points = [MemoryPoint(2, 4 * GIB), MemoryPoint(4, 6 * GIB)]  # 2 GiB + 1 GiB per example
    assert fits_without_checkpointing(decide_micro_batch(points, 10 * GIB, 4, 2, safety_margin=0.0))
    smaller = decide_micro_batch(points, 5 * GIB, 4, 2, safety_margin=0.0)  # fits at 2 × 4, not 4 × 2
    assert smaller.fits and smaller.changed and not fits_without_checkpointing(smaller)
    assert not fits_without_checkpointing(decide_micro_batch(points, 2 * GIB, 4, 2, safety_margin=0.0))
    assert not fits_without_checkpointing(None)  # every size ran out of memory


def _context(model: Path, folder: Path, **config: Any) -> PreflightContext:
    spec = chat_spec(model, folder, **{"batch_size": 4, "gradient_accumulation_steps": 2,
                                      "gradient_checkpointing": "auto", **config})
    ctx = PreflightContext(spec, cpu_profile(), PreflightOptions(safety_margin=0.0), folder / "work",
                           memory_cap_bytes=10 * GIB)
    ctx.precision, ctx.resolved, ctx.tokenizer, ctx.data = "fp32", object(), object(), object()
    return ctx


def _fake_steps(monkeypatch: pytest.MonkeyPatch, without_gib: float, with_gib: float) -> list[bool]:
    """Step peaks of `without_gib`/`with_gib` per example (plus 1 GiB); returns checkpointing per measured step."""
    seen: list[bool] = []

    def measure_step(ctx: PreflightContext, micro_batch: int, accel: Any, host: Any) -> dict[str, Any]:
        on = ctx.checkpointing_enabled
        seen.append(on)
        per_example = with_gib if on else without_gib
        return {"micro_batch": micro_batch, "host_peak_bytes": int((1 + per_example * micro_batch) * GIB),
                "accelerator_peak_bytes": None, "seconds": 0.1, "loss": 2.0}

    monkeypatch.setattr(full_step, "load_for_training", lambda ctx: None)
    monkeypatch.setattr(full_step, "measure_step", measure_step)
    return seen


def test_auto_turns_checkpointing_on_when_the_step_does_not_fit_without_it(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _fake_steps(monkeypatch, without_gib=4.0, with_gib=1.0)  # 17 GiB at 4 without, 5 GiB with
    ctx = _context(tiny_llama_dir, tmp_path)
    result = full_step.check_full_step(ctx)
    assert seen == [False, False, True, True]  # measured without, then again with it on
    assert ctx.checkpointing.enabled and ctx.run_config.gradient_checkpointing is True
    assert ctx.config.gradient_checkpointing == "auto"
    assert result.status == "pass" and "does not fit in memory without it" in result.message
    assert ctx.memory_fit is not None and ctx.memory_fit.micro_batch == 4  # the checkpointed step's fit
    assert result.figures["gradient_checkpointing"]["enabled"] is True
    assert result.figures["without_checkpointing"]["memory_fit"]["changed"] is True


def test_auto_leaves_it_off_when_the_step_fits_without_it(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _fake_steps(monkeypatch, without_gib=1.5, with_gib=1.0)  # 7 GiB at 4: fits in 10
    ctx = _context(tiny_llama_dir, tmp_path)
    result = full_step.check_full_step(ctx)
    assert seen == [False, False]
    assert not ctx.checkpointing.enabled and ctx.run_config.gradient_checkpointing is False
    assert result.status == "pass" and "without_checkpointing" not in result.figures
    trial, args = ctx.trial_arguments(8, tmp_path / "trial", micro_batch=4, accumulation=1, max_steps=1)
    assert trial.gradient_checkpointing is False and not args.activation_checkpointing


@pytest.mark.parametrize("setting", [True, False])
def test_true_and_false_measure_once_as_written(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: bool
) -> None:
    seen = _fake_steps(monkeypatch, without_gib=4.0, with_gib=4.0)  # does not fit either way
    ctx = _context(tiny_llama_dir, tmp_path, gradient_checkpointing=setting)
    full_step.check_full_step(ctx)
    assert seen == [setting] * len(seen) and seen
    assert ctx.checkpointing.enabled is setting


def test_the_checks_resolution_travels_in_the_spec_and_the_config_keeps_auto(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.engine.preflight import phase, runner

    choice = resolve_gradient_checkpointing("auto", True)
    report = PreflightReport(checks=[], hardware={}, gradient_checkpointing=choice.to_dict())
    monkeypatch.setattr(runner, "run_preflight", lambda spec, **kwargs: report)
    spec, _ = phase.preflight_for_run(chat_spec(tiny_llama_dir, tmp_path, gradient_checkpointing="auto"),
                                      memory_cap_bytes=None)
    assert spec.gradient_checkpointing == choice and spec.config.gradient_checkpointing == "auto"
    again = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))  # what the other ranks and the child read
    assert again.gradient_checkpointing == choice
    forced, _ = phase.preflight_for_run(chat_spec(tiny_llama_dir, tmp_path, gradient_checkpointing=True),
                                        memory_cap_bytes=None)
    assert forced.gradient_checkpointing is None  # true is used as written


def test_the_run_uses_the_checks_choice_then_the_checkpoints_then_the_rule(tmp_path: Path) -> None:
    auto = validate_config({"gradient_checkpointing": "auto"})
    decided = resolve_gradient_checkpointing("auto", True)
    assert run_checkpointing(auto, decided, None) == decided
    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    (checkpoint / CHECKPOINT_CONFIG).write_text(
        json.dumps({"config": {}, "derived": {"resolved_gradient_checkpointing": False}}), encoding="utf-8"
    )
    assert run_checkpointing(auto, None, checkpoint).enabled is False  # a resume keeps what the start chose
    assert run_checkpointing(auto, None, None).enabled is True  # nothing measured: on
    assert run_checkpointing(validate_config({"gradient_checkpointing": False}), decided, checkpoint).enabled is False
    assert with_checkpointing(auto, False).gradient_checkpointing is False


def test_an_experiment_compares_auto_as_the_value_the_run_resolved() -> None:
    recorded = {"resolved_precision": "bf16", "resolved_gradient_checkpointing": False}
    auto = effective_config({"gradient_checkpointing": "auto"}, recorded)
    assert auto["gradient_checkpointing"] is False
    assert effective_differences(auto, effective_config({"gradient_checkpointing": False})) == {}
    on = effective_config({"gradient_checkpointing": True})
    assert effective_differences(auto, on) == {"gradient_checkpointing": (False, True)}
    assert effective_config({"gradient_checkpointing": "auto"})["gradient_checkpointing"] == "auto"  # not recorded


def test_the_oom_advice_says_to_turn_it_on_when_auto_resolved_off() -> None:
    off = with_checkpointing(validate_config({"gradient_checkpointing": "auto"}), False)
    advice = oom_diagnosis(off, "fp32", MemoryError()).advice
    assert any("gradient_checkpointing: true" in line for line in advice)
    on = with_checkpointing(validate_config({"gradient_checkpointing": "auto"}), True)
    assert any("already on" in line for line in oom_diagnosis(on, "fp32", MemoryError()).advice)


def test_a_malformed_choice_in_a_spec_names_the_field(tmp_path: Path) -> None:
    from tunedeck.core.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        RunSpec.from_dict({"model": "m", "train": "t.jsonl", "out": str(tmp_path), "gradient_checkpointing": "yes"})
    assert "gradient_checkpointing" in str(raised.value)
    assert CheckpointingChoice.from_dict({"enabled": True}).enabled is True
