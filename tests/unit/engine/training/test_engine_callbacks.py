"""Callbacks in isolation: the first-step parameter check, early stopping, stop requests."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.waiting import HANG_S, wait_until
from tunedeck.core import failpoints
from tunedeck.core.events import NullEventWriter
from tunedeck.engine.training.callbacks import (
    ParameterChangeCheck,
    ParameterCheckError,
    PlateauStoppingCallback,
    StopRequestCallback,
)


def _control() -> SimpleNamespace:
    return SimpleNamespace(should_training_stop=False, should_save=False, should_evaluate=False)


def _model() -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    model[0].weight.requires_grad_(False)
    model[0].bias.requires_grad_(False)
    return model


def _step(model: torch.nn.Module, check: ParameterChangeCheck, mutate_frozen: bool = False) -> None:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    state = SimpleNamespace(global_step=0)
    check.on_train_begin(None, state, _control())
    model(torch.ones(2, 3)).sum().backward()
    check.on_pre_optimizer_step(None, state, _control(), optimizer=optimizer)
    optimizer.step()
    if mutate_frozen:
        with torch.no_grad():
            model[0].weight.add_(1.0)
    check.on_optimizer_step(None, state, _control(), optimizer=optimizer)


def test_first_step_check_passes_when_only_trainable_weights_move() -> None:
    model = _model()
    # Full fine-tuning with frozen tensors is itself an error; make everything trainable.
    for param in model.parameters():
        param.requires_grad_(True)
    check = ParameterChangeCheck(model, uses_peft=False, events=NullEventWriter())
    _step(model, check)
    assert check.report["ok"] and check.report["changed"] == 4


def test_first_step_check_fails_loudly_when_a_frozen_weight_moves() -> None:
    model = _model()
    check = ParameterChangeCheck(model, uses_peft=False, events=NullEventWriter())
    with pytest.raises(ParameterCheckError, match="frozen parameters changed"):
        _step(model, check, mutate_frozen=True)


def test_first_step_check_refuses_non_adapter_weights_under_lora() -> None:
    model = _model()
    check = ParameterChangeCheck(model, uses_peft=True, events=NullEventWriter())
    with pytest.raises(ParameterCheckError, match="non-adapter parameters are trainable"):
        _step(model, check)


def test_first_step_check_waits_for_a_non_zero_learning_rate() -> None:
    model = _model()
    check = ParameterChangeCheck(model, uses_peft=True, events=NullEventWriter())
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.0)
    state = SimpleNamespace(global_step=0)
    check.on_train_begin(None, state, _control())
    model(torch.ones(2, 3)).sum().backward()
    check.on_pre_optimizer_step(None, state, _control(), optimizer=optimizer)
    optimizer.step()
    check.on_optimizer_step(None, state, _control(), optimizer=optimizer)
    assert not check.done  # a warmup step at lr 0 moves nothing and proves nothing


def test_plateau_stopping_counts_patience_beyond_the_threshold() -> None:
    callback = PlateauStoppingCallback("eval_loss", greater_is_better=False, patience=2, threshold=0.1)
    state = SimpleNamespace(global_step=0)
    outcomes = []
    for step, loss in enumerate([2.0, 1.95, 1.5, 1.45, 1.44], start=1):
        state.global_step = step
        control = callback.on_evaluate(None, state, _control(), metrics={"eval_loss": loss})
        outcomes.append(control.should_training_stop)
    # 1.95 is within the threshold of 2.0 (1 bad), 1.5 improves, then two within-threshold values stop.
    assert outcomes == [False, False, False, False, True]
    assert callback.stopped_at == 5


def test_plateau_stopping_maximises_accuracy() -> None:
    callback = PlateauStoppingCallback("accuracy", greater_is_better=True, patience=1, threshold=0.0)
    state = SimpleNamespace(global_step=1)
    assert not callback.on_evaluate(None, state, _control(), metrics={"eval_accuracy": 0.5}).should_training_stop
    assert callback.on_evaluate(None, state, _control(), metrics={"eval_accuracy": 0.4}).should_training_stop


@pytest.mark.parametrize(("request_text", "saves"), [("pause", True), ("cancel", False), ("CANCEL\n", False)])
def test_stop_request_pauses_with_a_checkpoint_or_cancels(tmp_path: Path, request_text: str, saves: bool) -> None:
    stop = StopRequestCallback(tmp_path / "STOP")
    control = stop.on_step_end(None, _state(1), _control())
    assert not control.should_training_stop
    (tmp_path / "STOP").write_text(request_text)
    control = stop.on_step_end(None, _state(2), _control())
    assert control.should_training_stop and control.should_save is saves
    assert stop.on_epoch_end(None, None, _control()).should_save is False


def _state(step: int) -> SimpleNamespace:
    return SimpleNamespace(global_step=step)


def _step_end_in_thread(stop: StopRequestCallback, step: int) -> tuple[threading.Thread, list[SimpleNamespace]]:
    done: list[SimpleNamespace] = []
    thread = threading.Thread(target=lambda: done.append(stop.on_step_end(None, _state(step), _control())))
    thread.start()
    return thread, done


def test_an_armed_holdpoint_keeps_the_run_at_its_step_until_a_stop_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failpoints.ENV_HOLDS, "engine_step_end")
    monkeypatch.setenv(failpoints.ENV_STATE, str(tmp_path / "holds"))
    (tmp_path / "holds").mkdir()
    gate = failpoints.hold_gate(tmp_path / "holds", "engine_step_end")
    reached = failpoints.hold_reached(tmp_path / "holds", "engine_step_end")
    gate.write_text("3")
    stop = StopRequestCallback(tmp_path / "STOP")
    assert not stop.on_step_end(None, _state(2), _control()).should_training_stop  # before the gate's step
    assert not reached.exists()

    thread, done = _step_end_in_thread(stop, 3)
    wait_until(reached.exists, "the run to reach its hold")
    assert reached.read_text() == "3"
    assert thread.is_alive() and not done  # held at step 3, however long the test takes
    (tmp_path / "STOP").write_text("pause")
    thread.join(timeout=HANG_S)
    assert done and done[0].should_training_stop and done[0].should_save  # the held run obeys the pause


def test_removing_the_gate_lets_a_held_run_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.ENV_HOLDS, "engine_step_end")
    monkeypatch.setenv(failpoints.ENV_STATE, str(tmp_path))
    gate = failpoints.hold_gate(tmp_path, "engine_step_end")
    gate.write_text("1")
    stop = StopRequestCallback(tmp_path / "STOP")
    thread, done = _step_end_in_thread(stop, 5)
    wait_until(failpoints.hold_reached(tmp_path, "engine_step_end").exists, "the run to reach its hold")
    assert thread.is_alive()
    gate.unlink()
    thread.join(timeout=HANG_S)
    assert done and not done[0].should_training_stop


def test_an_unarmed_holdpoint_never_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(failpoints.ENV_HOLDS, raising=False)
    monkeypatch.setenv(failpoints.ENV_STATE, str(tmp_path))
    failpoints.hold_gate(tmp_path, "engine_step_end").write_text("0")  # a gate alone does not arm the point
    stop = StopRequestCallback(tmp_path / "STOP")
    assert not stop.on_step_end(None, _state(4), _control()).should_training_stop
    assert not failpoints.hold_reached(tmp_path, "engine_step_end").exists()


def test_metric_events_carry_the_preference_trainers_logged_metrics(tmp_path: Path) -> None:
    import json

    from tunedeck.core.events import EventWriter
    from tunedeck.core.rundir import RunDir
    from tunedeck.engine.training.callbacks import EventsCallback, NullProgress
    from tunedeck.web.job_view import PREFERENCE_CHARTS

    events = EventWriter(tmp_path / "events.jsonl")
    callback = EventsCallback(events, RunDir(tmp_path), NullProgress())
    state = SimpleNamespace(global_step=5, epoch=0.5, num_input_tokens_seen=100, max_steps=10)
    callback.on_train_begin(None, state, _control())
    logs = {
        "loss": 0.69, "learning_rate": 1e-5, "grad_norm": 1.0, "rewards/chosen": 0.2, "rewards/rejected": -0.1,
        "rewards/margins": 0.3, "rewards/accuracies": 0.75, "logps/chosen": -40.0, "logps/rejected": float("nan"),
        "nll_loss": 1.2, "log_odds_ratio": -0.5, "kl": 0.01, "num_tokens": 512.0, "note": "text",
    }  # fmt: skip
    callback.on_log(None, state, _control(), logs=logs)
    callback.on_evaluate(None, state, _control(), metrics={"eval_loss": 0.6, "eval_rewards/margins": 0.4})
    events.close()
    metric, evaluation = (json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines())
    for key in ("rewards/chosen", "rewards/margins", "rewards/accuracies", "logps/chosen", "nll_loss", "kl"):
        assert metric[key] == logs[key], key
    assert metric["logps/rejected"] is None  # NaN is a gap, never a number
    assert "num_tokens" not in metric and "note" not in metric  # only the preference metrics are added
    assert evaluation["eval_rewards/margins"] == 0.4
    # The job page charts the names the events carry.
    charted = {name for _, _, series in PREFERENCE_CHARTS for name, _ in series}
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"} <= charted
    assert {"eval_rewards/chosen", "eval_rewards/margins", "eval_rewards/accuracies"} <= charted
