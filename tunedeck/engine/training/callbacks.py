"""Trainer callbacks: events and progress, stop requests, early stopping, the first-step check."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from transformers import TrainerCallback

from tunedeck.core.checkpoint_parts import mark_part_written
from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.failpoints import failpoint, holdpoint, out_of_memory_point
from tunedeck.core.rundir import CHECKPOINT_CONFIG, CHECKPOINT_ENV, RunDir
from tunedeck.engine.distributed.ranks import Ranks, barrier

# The trainer pickles its arguments beside every save; nothing reads them back, and tunedeck
# keeps pickles out of what it stores.
PICKLED_ARGS = "training_args.bin"


class ProgressSink(Protocol):
    """Receives progress for display (the CLI's progress bar); the engine never prints."""

    def start(self, total_steps: int, first_step: int) -> None:
        """Training begins (at `first_step` when resuming)."""

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """A metric or eval event was written."""

    def finish(self) -> None:
        """Training ended, whatever the outcome."""


class NullProgress:
    """A progress sink that shows nothing."""

    def start(self, total_steps: int, first_step: int) -> None:
        """Nothing to show."""

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Nothing to show."""

    def finish(self) -> None:
        """Nothing to show."""


class ParameterCheckError(TunedeckError):
    """The first optimizer step changed parameters it must not change, or none it should."""


class EventsCallback(TrainerCallback):
    """Writes metric, eval and checkpoint events, and feeds the progress sink."""

    def __init__(
        self, events: EventWriter, run_dir: RunDir, progress: ProgressSink, ranks: Ranks | None = None
    ) -> None:
        self.events = events
        self.run_dir = run_dir
        self.progress = progress
        self.ranks = ranks or Ranks()
        self._last_time: float | None = None
        self._last_tokens = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Start the throughput clock and the progress display."""
        self._last_time = time.monotonic()
        self._last_tokens = int(state.num_input_tokens_seen or 0)
        self.progress.start(int(state.max_steps), int(state.global_step))

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Write one metric event per trainer log (a NaN loss is written as NaN, never hidden)."""
        if not logs or "loss" not in logs:
            return
        now = time.monotonic()
        tokens = int(state.num_input_tokens_seen or 0)
        elapsed = now - (self._last_time or now)
        record: dict[str, Any] = {
            "step": int(state.global_step),
            "epoch": round(float(state.epoch or 0.0), 4),
            "loss": float(logs["loss"]),
            "learning_rate": float(logs.get("learning_rate", 0.0)),
            "grad_norm": _finite_or_none(logs.get("grad_norm")),
            "tokens_per_second": round((tokens - self._last_tokens) / elapsed, 2) if elapsed > 0 else None,
            "tokens_seen": tokens,
        }
        record.update({key: _finite_or_none(value) for key, value in logs.items() if _is_trainer_metric(key, value)})
        self._last_time, self._last_tokens = now, tokens
        self.events.emit(EventType.METRIC, **record)
        self.progress.update(record["step"], record)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """Write one eval event with eval_loss, perplexity and the task metrics."""
        if not metrics:
            return
        record: dict[str, Any] = {
            "step": int(state.global_step),
            "epoch": round(float(state.epoch or 0.0), 4),
        }
        record.update({key: _finite_or_none(value) for key, value in metrics.items() if _is_number(value)})
        if "eval_loss" in metrics and "eval_perplexity" not in record and record.get("eval_loss") is not None:
            from tunedeck.eval.metrics.loss import perplexity

            record["eval_perplexity"] = perplexity(float(metrics["eval_loss"]))
        self.events.emit(EventType.EVAL, **record)
        self.progress.update(record["step"], record)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Test hook only: this process runs out of memory at the start of the step, when a test arms it."""
        out_of_memory_point(f"engine_rank{self.ranks.rank}_oom_step{state.global_step + 1}")

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the checkpoint event once the checkpoint folder is complete."""
        # The trainer calls on_save after weights, optimizer, scheduler, RNG and state are written,
        # so the event only ever names a complete checkpoint.
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        ranks = self.ranks
        if ranks.distributed:
            # Every process has written its part when the trainer calls on_save; its marker says so,
            # and the barrier keeps rank 0 from naming the checkpoint before the last part is there.
            # Crash test hook: this rank dies with its part on disk but no marker (so never committed).
            failpoint(f"engine_rank{ranks.rank}_part_saved_step{state.global_step}")
            mark_part_written(folder, ranks.rank, ranks.world_size)
            barrier(ranks)
        if not ranks.is_main:
            return
        (folder / PICKLED_ARGS).unlink(missing_ok=True)
        if self.run_dir.config.is_file():
            # Resolved hyperparameters travel with every checkpoint.
            shutil.copyfile(self.run_dir.config, folder / CHECKPOINT_CONFIG)
        if self.run_dir.env.is_file():
            # The platform it was written on: a resume on another machine is checked again before training.
            shutil.copyfile(self.run_dir.env, folder / CHECKPOINT_ENV)
        # Crash test hook: the checkpoint is on disk but no event names it yet (kills the worker too).
        failpoint("engine_checkpoint_saved", kill_parent=True)
        self.events.emit(
            EventType.CHECKPOINT, step=int(state.global_step), path=str(folder), parts=ranks.world_size
        )

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the progress display."""
        self.progress.finish()


_STOP_CODES: dict[str | None, int] = {None: 0, "pause": 1, "cancel": 2}
_STOP_BY_CODE = {code: request for request, code in _STOP_CODES.items()}


class StopRequestCallback(TrainerCallback):
    """Obeys a stop file after each step: `pause` saves a checkpoint and stops, `cancel` stops at once."""

    def __init__(self, stop_file: Path, agree: Callable[[int], int] | None = None) -> None:
        self.stop_file = stop_file
        self.requested: str | None = None
        # Several processes must stop at the same step: each reads the file, then they agree on the
        # strongest request (`agree` takes this process's code and returns the largest of all).
        self._agree = agree

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Read the stop file; on a request, stop (saving first for a pause)."""
        # Test hook: a test can keep the run at this step until it asks for a stop or lets it go on.
        holdpoint("engine_step_end", int(state.global_step), released=self.stop_file.is_file)
        if self.requested is None and self.stop_file.is_file():
            text = self.stop_file.read_text(encoding="utf-8").strip().lower()
            self.requested = "pause" if text == "pause" else "cancel"
        if self._agree is not None:
            self.requested = _STOP_BY_CODE[self._agree(_STOP_CODES[self.requested])]
        if self.requested is None:
            return control
        control.should_training_stop = True
        control.should_evaluate = False
        control.should_save = self.requested == "pause"
        return control

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Keep the end-of-epoch hooks from saving or evaluating again after a stop request."""
        if self.requested is not None:
            # The step that saw the request already saved (pause) or must not save (cancel).
            control.should_save = False
            control.should_evaluate = False
        return control


class PlateauStoppingCallback(TrainerCallback):
    """Early stopping on `metric` with patience and threshold, with or without load-best.

    The trainer's own early stopping demands `load_best_model_at_end`; the job config allows
    early stopping alone, so the bookkeeping lives here.
    """

    def __init__(self, metric: str, greater_is_better: bool, patience: int, threshold: float) -> None:
        self.metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        self.greater_is_better = greater_is_better
        self.patience = patience
        self.threshold = threshold
        self.best: float | None = None
        self.bad_evaluations = 0
        self.stopped_at: int | None = None

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Count evaluations without an improvement beyond the threshold; stop at patience."""
        if not metrics or self.metric not in metrics:
            raise TunedeckError(
                f"metric_for_best_model: evaluation produced no {self.metric} (found {sorted(metrics or {})})"
            )
        value = float(metrics[self.metric])
        improved = self.best is None or (
            value > self.best + self.threshold if self.greater_is_better else value < self.best - self.threshold
        )
        if improved:
            self.best, self.bad_evaluations = value, 0
        else:
            self.bad_evaluations += 1
        if self.bad_evaluations >= self.patience:
            control.should_training_stop = True
            self.stopped_at = int(state.global_step)
        return control


class ParameterChangeCheck(TrainerCallback):
    """Verifies the first optimizer step: frozen tensors unchanged; every tensor with a gradient changed.

    LoRA must touch adapter (and task head) tensors only; full fine-tuning must move every
    trainable tensor that received a gradient. Anything else means the wrong weights train.
    """

    def __init__(self, model: Any, uses_peft: bool, events: EventWriter) -> None:
        self.model = model
        self.uses_peft = uses_peft
        self.events = events
        self.done = False
        self._frozen_sums: dict[str, tuple[float, float]] = {}
        self._before: dict[str, Any] = {}
        self.report: dict[str, Any] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Checksum every frozen tensor."""
        self._frozen_sums = {
            name: _checksum(param) for name, param in self.model.named_parameters() if not param.requires_grad
        }

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Copy the tensors that hold a gradient, at the first step with a non-zero rate."""
        if self.done:
            return
        optimizer = kwargs.get("optimizer")
        if optimizer is not None and all(group["lr"] == 0 for group in optimizer.param_groups):
            # The first warmup step has learning rate 0 and moves nothing; check the next one.
            self._before = {}
            return
        self._before = {
            name: param.detach().to("cpu", copy=True)
            for name, param in self.model.named_parameters()
            if param.requires_grad and param.grad is not None and bool(param.grad.detach().abs().sum() > 0)
        }
        if not self._before:
            self.done = True
            raise ParameterCheckError("first optimizer step check failed: no trainable parameter has a gradient")

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Compare after the step and raise ParameterCheckError on any unexpected change."""
        if self.done or not self._before:
            return
        self.done = True
        params = dict(self.model.named_parameters())
        frozen_changed = sorted(name for name, total in self._frozen_sums.items() if _checksum(params[name]) != total)
        unchanged = sorted(
            name for name, before in self._before.items() if bool((params[name].detach().cpu() == before).all())
        )
        trainable = [name for name, param in params.items() if param.requires_grad]
        problems = []
        if frozen_changed:
            problems.append(f"frozen parameters changed: {frozen_changed[:5]}")
        if unchanged:
            problems.append(f"parameters with a gradient did not change: {unchanged[:5]}")
        if self.uses_peft:
            outside = [name for name in trainable if not _is_adapter_or_head(name)]
            if outside:
                problems.append(f"non-adapter parameters are trainable under LoRA: {outside[:5]}")
        elif self._frozen_sums:
            problems.append(f"full fine-tuning left parameters frozen: {sorted(self._frozen_sums)[:5]}")
        self.report = {
            "step": int(state.global_step) + 1,
            "changed": len(self._before) - len(unchanged),
            "trainable_tensors": len(trainable),
            "frozen_tensors": len(self._frozen_sums),
            "ok": not problems,
        }
        self._before = {}
        self.events.emit(
            EventType.LOG,
            level="info" if not problems else "error",
            message="first-step parameter check",
            **self.report,
        )
        if problems:
            raise ParameterCheckError("first optimizer step check failed: " + "; ".join(problems))


def _is_adapter_or_head(name: str) -> bool:
    # peft names adapter tensors lora_*; task heads it trains in full are under modules_to_save.
    return "lora_" in name or "modules_to_save" in name


def _checksum(param: Any) -> tuple[float, float]:
    """Sum and absolute sum in float64: any real update changes one of them (cheaper than a copy)."""
    import torch

    with torch.no_grad():
        values = param.detach().to(torch.float64)
        return float(values.sum().item()), float(values.abs().sum().item())


def _finite_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What the preference trainers log beside the loss, kept under their own names in metric events (the
# job page charts them by these names): "rewards/chosen", "rewards/margins", "logps/rejected", ...
# (every name with a "/"), orpo's nll_loss and log-odds, kto's kl.
PREFERENCE_LOG_KEYS = frozenset({"nll_loss", "log_odds_ratio", "log_odds_chosen", "kl"})


def _is_trainer_metric(key: str, value: Any) -> bool:
    """Whether a trainer log entry is a preference metric the metric event carries as it is."""
    return ("/" in key or key in PREFERENCE_LOG_KEYS) and _is_number(value)
