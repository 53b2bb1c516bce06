"""The retry loop on fake trainers: halving, restart points, and when it gives up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tunedeck.config.loading import validate_config
from tunedeck.core.events import NullEventWriter
from tunedeck.engine.training.diagnosis import DiagnosedError
from tunedeck.engine.training.oom_retry import GroupRestartError, train_with_oom_retry


class FakeState:
    def __init__(self) -> None:
        self.global_step = 0


class FakeTrainer:
    """Runs out of memory above `limit`, after `steps_before_oom` optimizer steps."""

    def __init__(self, micro: int, accumulation: int, limit: int, steps_before_oom: int, model: Any) -> None:
        self.micro, self.accumulation, self.limit = micro, accumulation, limit
        self.steps_before_oom = steps_before_oom
        self.state = FakeState()
        self.model = model
        self.optimizer: Any = object()
        self.lr_scheduler: Any = object()
        self.resumed_from: str | None = None

    def train(self, resume_from_checkpoint: str | None = None) -> str:
        self.resumed_from = resume_from_checkpoint
        if self.micro > self.limit:
            self.state.global_step = self.steps_before_oom
            with torch.no_grad():
                self.model.weight.add_(float(self.steps_before_oom))  # the failed steps moved the weights
            raise torch.OutOfMemoryError("CUDA out of memory")
        return "done"


def _run(tmp_path: Path, limit: int, steps_before_oom: int = 0, **config: Any) -> tuple[Any, list[FakeTrainer], Any]:
    model = torch.nn.Linear(2, 2)
    built: list[FakeTrainer] = []

    def build(micro: int, accumulation: int) -> FakeTrainer:
        built.append(FakeTrainer(micro, accumulation, limit, steps_before_oom, model))
        return built[-1]

    settings = {"batch_size": 6, "gradient_accumulation_steps": 2, **config}
    outcome = train_with_oom_retry(
        build, validate_config(settings), "fp32", model=model, events=NullEventWriter(), checkpoints_dir=tmp_path
    )
    return outcome, built, model


def test_halving_keeps_the_effective_batch_exact(tmp_path: Path) -> None:
    outcome, built, _ = _run(tmp_path, limit=1)
    assert [(t.micro, t.accumulation) for t in built] == [(6, 2), (3, 4), (1, 12)]
    assert outcome.output == "done" and (outcome.micro_batch, outcome.accumulation) == (1, 12)
    assert [a["outcome"] for a in outcome.attempts] == ["oom", "oom", "completed"]


def test_a_retry_after_optimizer_steps_resumes_the_newest_checkpoint(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{}", encoding="utf-8")
    _, built, _ = _run(tmp_path, limit=3, steps_before_oom=2)
    assert [t.resumed_from for t in built] == [None, str(checkpoint)]


def test_snapshot_restore_returns_the_initial_weights(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    initial = model.weight.detach().clone()
    built: list[FakeTrainer] = []

    def build(micro: int, accumulation: int) -> FakeTrainer:
        built.append(FakeTrainer(micro, accumulation, 3, 5, model))
        return built[-1]

    train_with_oom_retry(
        build,
        validate_config({"batch_size": 6}),
        "fp32",
        model=model,
        events=NullEventWriter(),
        checkpoints_dir=tmp_path,
    )
    assert torch.equal(model.weight, initial)


def test_gives_up_at_micro_batch_one_with_the_advice(tmp_path: Path) -> None:
    with pytest.raises(DiagnosedError) as caught:
        _run(tmp_path, limit=0)
    diagnosis = caught.value.diagnosis
    assert diagnosis.kind == "oom" and diagnosis.figures["retry"]["reason"] == "already at micro-batch 1"
    assert len(diagnosis.figures["retry"]["attempts"]) == 3


def test_other_errors_are_not_retried(tmp_path: Path) -> None:
    class Broken(FakeTrainer):
        def train(self, resume_from_checkpoint: str | None = None) -> str:
            raise ValueError("not memory")

    with pytest.raises(ValueError, match="not memory"):
        train_with_oom_retry(
            lambda micro, accumulation: Broken(micro, accumulation, 0, 0, torch.nn.Linear(1, 1)),
            validate_config({}),
            "fp32",
            model=torch.nn.Linear(1, 1),
            events=NullEventWriter(),
            checkpoints_dir=tmp_path,
        )


def test_on_several_processes_the_retry_is_a_restart_of_the_group(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    asked: list[tuple[int, int, list[dict[str, Any]]]] = []
    built: list[FakeTrainer] = []

    def build(micro: int, accumulation: int) -> FakeTrainer:
        built.append(FakeTrainer(micro, accumulation, 2, 0, model))
        return built[-1]

    def retry(config: Any, **kwargs: Any) -> Any:
        return train_with_oom_retry(build, config, "fp32", model=model, events=NullEventWriter(),
                                    checkpoints_dir=tmp_path, processes=2, **kwargs)  # fmt: skip

    config = validate_config({"batch_size": 8, "gradient_accumulation_steps": 1})
    with pytest.raises(GroupRestartError) as caught:
        retry(config, restart_group=lambda micro, accumulation, attempts: asked.append((micro, accumulation, attempts)))
    assert [(micro, accumulation) for micro, accumulation, _ in asked] == [(4, 2)]
    assert caught.value.diagnosis.figures["retry"]["micro_batch"] == 4 and len(built) == 1
    # The restarted group trains with what was asked, and keeps counting attempts.
    outcome = retry(config, restart_group=lambda *_: None,
                    restarted={"micro_batch": 2, "accumulation": 4, "attempts": asked[0][2]})  # fmt: skip
    assert (outcome.micro_batch, outcome.accumulation) == (2, 4)
    assert [attempt["outcome"] for attempt in outcome.attempts] == ["oom", "completed"]
    # A launcher that cannot restart the group: no retry, and the reason.
    with pytest.raises(DiagnosedError) as refused:
        retry(config)
    assert not isinstance(refused.value, GroupRestartError)
    assert "cannot restart them" in refused.value.diagnosis.figures["retry"]["reason"]


def test_kto_is_never_retried_below_micro_batch_two(tmp_path: Path) -> None:
    # kto pairs each prompt with another completion of its micro-batch: 6 → 3 → (1 refused).
    with pytest.raises(DiagnosedError) as caught:
        _run(tmp_path, limit=2, task="kto", use_peft=False)
    diagnosis = caught.value.diagnosis
    assert [attempt["micro_batch"] for attempt in diagnosis.figures["retry"]["attempts"]] == [6, 3]
    reason = diagnosis.figures["retry"]["reason"]
    assert "cannot be halved" in reason and "at least 2" in reason
    assert any("needs at least 2" in advice for advice in diagnosis.advice)


def test_kto_halves_while_the_micro_batch_stays_two_or_more(tmp_path: Path) -> None:
    outcome, built, _ = _run(tmp_path, limit=2, task="kto", use_peft=False, batch_size=8)
    assert [(t.micro, t.accumulation) for t in built] == [(8, 2), (4, 4), (2, 8)]
    assert outcome.micro_batch == 2
