"""Out-of-memory during training: diagnose it and, when the job allows, retry with a smaller micro-batch.

Each retry halves the micro-batch and multiplies the accumulation so that the effective
batch stays exactly what the job asked for, down to micro-batch 1. A retry must start from
weights the failed attempt did not half-train: from the newest checkpoint the run wrote,
from the weights as they were when the failed attempt began (when it failed before its
first optimizer step), or from a snapshot of the trainable weights taken before training
(kept only when it is small, as for LoRA adapters).

On several processes the retry is a restart of every process (`GroupRestartError`, and
`tunedeck.engine.distributed.group_restart` for where the restarted group goes on from).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.config.preference import smallest_micro_batch
from tunedeck.config.training import TrainingConfig
from tunedeck.core.events import EventWriter
from tunedeck.engine.training.diagnosis import DiagnosedError, is_out_of_memory, oom_diagnosis, smaller_split

# A snapshot of trainable weights lives in host memory; beyond this it is not taken, and a
# retry after optimizer steps needs a checkpoint instead.
SNAPSHOT_LIMIT_BYTES = 2 * 2**30
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

TrainerFactory = Callable[[int, int], Any]
# Asks every process to restart with this micro-batch and accumulation, after these attempts.
GroupRestart = Callable[[int, int, list[dict[str, Any]]], None]


class GroupRestartError(DiagnosedError):
    """This process ran out of memory and asked the whole group to restart with a smaller micro-batch."""


@dataclass
class RetryOutcome:
    """The trainer that finished, what `train()` returned, and every attempt made."""

    trainer: Any
    output: Any
    micro_batch: int
    accumulation: int
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """What results.json records."""
        return {"micro_batch": self.micro_batch, "accumulation": self.accumulation, "attempts": self.attempts}


class TrainableSnapshot:
    """A host copy of the trainable parameters, to restore before a retry from scratch."""

    def __init__(self, model: Any) -> None:
        self.tensors = {
            name: param.detach().to("cpu", copy=True) for name, param in model.named_parameters() if param.requires_grad
        }

    @staticmethod
    def trainable_bytes(model: Any) -> int:
        """Bytes the snapshot would take."""
        return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)

    def restore(self, model: Any) -> None:
        """Copy the snapshot back into the model's parameters."""
        import torch

        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, tensor in self.tensors.items():
                params[name].copy_(tensor.to(params[name].device))


def train_with_oom_retry(
    build: TrainerFactory,
    config: TrainingConfig,
    precision: str,
    *,
    model: Any,
    events: EventWriter,
    checkpoints_dir: Path,
    resume_from: Path | None = None,
    processes: int = 1,
    restart_group: GroupRestart | None = None,
    restarted: dict[str, Any] | None = None,
) -> RetryOutcome:
    """Run `build(micro_batch, accumulation).train(...)`, retrying on out-of-memory as the config allows.

    An out-of-memory that is not retried raises `DiagnosedError` (with the OOM advice) from
    the original error; every retry writes its own `oom` diagnosis event first. On several
    `processes` the retry cannot happen within the run: the process that ran out of memory
    cannot pull the others, waiting in a collective, into a retry of their own. It calls
    `restart_group` with the smaller micro-batch and raises GroupRestartError instead, and
    the restarted run passes what it was asked for as `restarted` (micro_batch,
    accumulation, attempts).
    """
    micro, accumulation = config.batch_size, config.gradient_accumulation_steps
    attempts: list[dict[str, Any]] = []
    if restarted is not None:
        micro, accumulation = int(restarted["micro_batch"]), int(restarted["accumulation"])
        attempts = list(restarted.get("attempts") or [])
    smallest = smallest_micro_batch(config)  # kto's KL term pairs completions within a micro-batch: never below 2
    snapshot = None
    if (
        config.auto_reduce_batch_on_oom
        and micro // 2 >= smallest
        and processes == 1  # a restarted process loads the weights afresh
        and TrainableSnapshot.trainable_bytes(model) <= SNAPSHOT_LIMIT_BYTES
    ):
        snapshot = TrainableSnapshot(model)
    resume = resume_from
    while True:
        trainer = build(micro, accumulation)
        start_step = _checkpoint_step(resume)
        try:
            output = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            step = int(trainer.state.global_step)
            attempts.append({"micro_batch": micro, "accumulation": accumulation, "outcome": "oom", "step": step})
            _release(trainer)
            trainer = None
            split = smaller_split(micro * accumulation, micro, smallest) if config.auto_reduce_batch_on_oom else None
            if processes > 1 and restart_group is not None and split is not None:
                restart_group(split.micro_batch, split.accumulation, attempts)
                retry = {"micro_batch": split.micro_batch, "accumulation": split.accumulation,
                         "from": "the newest complete checkpoint, with every process restarted"}  # fmt: skip
                raise GroupRestartError(oom_diagnosis(
                    config, precision, error, micro_batch=micro, accumulation=accumulation, step=step, retry=retry
                )) from error
            next_resume, restored = _restart_point(checkpoints_dir, resume, step, start_step, snapshot, model)
            if split is None or not restored or processes > 1:
                reason = _no_retry_reason(config, micro, restored, processes, smallest if split is None else 1)
                diagnosis = oom_diagnosis(
                    config, precision, error, micro_batch=micro, accumulation=accumulation, step=step
                )
                diagnosis.figures["retry"] = {"retried": False, "reason": reason, "attempts": attempts}
                raise DiagnosedError(diagnosis) from error
            retry = {"micro_batch": split.micro_batch, "accumulation": split.accumulation, "from": next_resume}
            oom_diagnosis(
                config, precision, error, micro_batch=micro, accumulation=accumulation, step=step, retry=retry
            ).emit(events)
            micro, accumulation = split.micro_batch, split.accumulation
            resume = Path(next_resume) if next_resume is not None else None
            continue
        attempts.append({"micro_batch": micro, "accumulation": accumulation, "outcome": "completed"})
        return RetryOutcome(trainer, output, micro, accumulation, attempts)


def _restart_point(
    checkpoints_dir: Path,
    resume: Path | None,
    step: int,
    start_step: int,
    snapshot: TrainableSnapshot | None,
    model: Any,
) -> tuple[str | None, bool]:
    """Where the retry starts, and whether the weights are in a state to start there."""
    newest = _newest_checkpoint(checkpoints_dir)
    if newest is not None and _checkpoint_step(newest) >= start_step:
        return str(newest), True
    if step == start_step:
        return (str(resume) if resume is not None else None), True  # no optimizer step ran: weights untouched
    if snapshot is not None and resume is None:
        snapshot.restore(model)
        return None, True
    return (str(resume) if resume is not None else None), resume is not None


def _no_retry_reason(
    config: TrainingConfig, micro: int, restored: bool, processes: int = 1, unsplit_floor: int = 1
) -> str:
    """Why an out-of-memory is not retried (`unsplit_floor`: the task's smallest micro-batch, none reached)."""
    if not config.auto_reduce_batch_on_oom:
        return "auto_reduce_batch_on_oom is false"
    if micro == 1:
        return "already at micro-batch 1"
    if unsplit_floor > 1:
        return (
            f"micro-batch {micro} cannot be halved: kto pairs each prompt with another completion of the same "
            f"micro-batch for its KL term, so it trains with at least {unsplit_floor} (and an exact split of the "
            "effective batch)"
        )
    if processes > 1:
        return f"{processes} processes train together, and their launcher cannot restart them"
    if not restored:
        return "no checkpoint to restart from and the weights already changed"
    return ""


def _newest_checkpoint(folder: Path) -> Path | None:
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _CHECKPOINT.match(p.name)) and p.is_dir()]
    complete = [(step, path) for step, path in found if (path / "trainer_state.json").is_file()]
    return max(complete)[1] if complete else None


def _checkpoint_step(path: Path | str | None) -> int:
    if path is None:
        return 0
    match = _CHECKPOINT.match(Path(path).name)
    return int(match.group(1)) if match else 0


def _release(trainer: Any) -> None:
    """Drop what a failed attempt holds on the accelerator before the next one allocates."""
    import torch

    trainer.optimizer = None
    trainer.lr_scheduler = None
    model = getattr(trainer, "model", None)
    if model is not None:
        model.zero_grad(set_to_none=True)
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:
        accelerator.free_memory()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
