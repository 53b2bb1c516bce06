"""Callbacks in isolation: the first-step parameter check, early stopping, stop requests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tunedeck.core.events import NullEventWriter
from tunedeck.engine.callbacks import (
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
    control = stop.on_step_end(None, None, _control())
    assert not control.should_training_stop
    (tmp_path / "STOP").write_text(request_text)
    control = stop.on_step_end(None, None, _control())
    assert control.should_training_stop and control.should_save is saves
    assert stop.on_epoch_end(None, None, _control()).should_save is False
