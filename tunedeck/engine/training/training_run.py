"""`TrainingRun`: one training run as explicit steps, on the transformers Trainer.

`run_training`, at the end of this module, drives the steps in this order:

    setup() → evaluate_baseline() → train() → [evaluate() → save()] → finish(result); cleanup() always

`setup` runs every check that can fail on bad input (config, hardware, model, data,
max_length, resume point) before the run directory exists (`tunedeck.engine.training.run_plan`), so a
refused run leaves nothing behind; then it creates (or reopens, to resume) the run directory
and its event log. From
there on, failures are recorded in the run directory (a diagnosis event and results.json)
because the run may be resumed. `evaluate` and `save` run only when training was not paused
or cancelled. Intermediate checkpoints are the Trainer's own (its save strategy, resumable by
`spec.resume_from`); `save` writes the final model to final/.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunedeck.config.preference import is_preference_task
from tunedeck.config.training import GENERATION_METRIC_PREFIX, TrainingConfig
from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter, NullEventWriter, Phase
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.ranks import (
    Ranks,
    broadcast_from_main,
    current_ranks,
    destroy_process_group,
    device_type_of,
    gather_from_all,
    init_process_group,
    max_across_ranks,
    rank_placement,
)
from tunedeck.engine.host.gpu_telemetry import open_telemetry
from tunedeck.engine.host.hardware import HardwareProfile, detect_hardware
from tunedeck.engine.host.system_sampler import SystemSampler
from tunedeck.engine.models.model_source import HubResolver
from tunedeck.engine.speedups.chunked_loss import LogitsBudget, chunk_logits_limit
from tunedeck.engine.training.callbacks import (
    EventsCallback,
    NullProgress,
    ParameterChangeCheck,
    PlateauStoppingCallback,
    ProgressSink,
    StopRequestCallback,
)
from tunedeck.engine.training.run_plan import RunPlan, open_run_dir, plan_run
from tunedeck.engine.training.run_results import finish_run, finite, numeric_metrics, record_failure, save_final_model
from tunedeck.engine.training.run_spec import RunResult, RunSpec
from tunedeck.engine.training.trainer_setup import accuracy_metrics, best_metric_name, training_arguments
from tunedeck.eval.quality_diagnosis import (
    guard_regression_diagnoses,
    no_update_diagnosis,
    points_from_log_history,
    quality_diagnoses,
)

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from tunedeck.core.diagnosis import Diagnosis
    from tunedeck.engine.generation.generation_eval import GenerationEvalCallback
    from tunedeck.engine.preference.reference import ReferenceChoice
    from tunedeck.engine.training.batch_collation import CollationChoice
    from tunedeck.engine.training.diagnosis import DiagnosedError
    from tunedeck.engine.training.oom_retry import RetryOutcome
    from tunedeck.engine.training.trainer import TunedeckTrainer
    from tunedeck.engine.training.training_speed import TrainingSpeedMonitor
    from tunedeck.eval.baseline import BaselineEvaluator
    from tunedeck.eval.quality_diagnosis import EvalPoint, TrainPoint

_TIMING_SUFFIXES = ("_runtime", "_per_second")
_PROCEDURE_PREFIX = f"eval_{GENERATION_METRIC_PREFIX}"


class RunFailedError(TunedeckError):
    """Training started and then failed; the run directory holds a diagnosis and results.json."""


class MainRankRefusedError(TunedeckError):
    """Rank 0 could not start the run (its own error says why); the other processes stop with it."""


@dataclass(frozen=True)
class _Opened:
    """The run directory and its event log, from `setup` until `cleanup`."""

    run_dir: RunDir
    events: EventWriter


@dataclass(frozen=True)
class _TrainingCallbacks:
    """The Trainer's callbacks in their order (`all`), and those `train` reads after training."""

    all: list[Any]
    stop: StopRequestCallback
    plateau: PlateauStoppingCallback | None
    speed: TrainingSpeedMonitor
    generation_eval: GenerationEvalCallback | None


@dataclass(frozen=True)
class _Trained:
    """What `train` leaves for `evaluate` and `save`."""

    trainer: TunedeckTrainer
    generation_eval: GenerationEvalCallback | None


class TrainingRun:
    """One training run from spec to run directory; see the module docstring for the order of the steps.

    `preflight` is the report of the checks run just before (the job's first phase): it is
    kept in the run directory with the memory-fit decision it applied.

    On several processes (`ranks`, from the launcher's environment by default) every process
    runs every step; rank 0 alone creates the run directory and writes events, evaluation
    files and results, and the others write only their part of each checkpoint.
    """

    def __init__(
        self,
        spec: RunSpec,
        *,
        hardware: HardwareProfile | None = None,
        hub: HubResolver | None = None,
        progress: ProgressSink | None = None,
        preflight: dict[str, Any] | None = None,
        ranks: Ranks | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.ranks = ranks or current_ranks()
        # Steps, warmup and the schedule count every process's batches, however the run was launched.
        self.spec = dataclasses.replace(spec, processes=self.ranks.world_size)
        self.config: TrainingConfig = spec.config
        self._hardware = hardware
        self._hub = hub
        self._progress = progress
        self._preflight = preflight
        self._plan: RunPlan | None = None
        self._opened: _Opened | None = None
        self._evaluator: BaselineEvaluator | None = None
        self._trained: _Trained | None = None
        self._placements: list[dict[str, Any]] = []
        self._baseline_metrics: dict[str, Any] | None = None
        self.quality: list[dict[str, Any]] = []  # the quality warnings emitted, as their event fields

    # --- state, once the step that makes it has run ---------------------------------------------

    @property
    def plan(self) -> RunPlan:
        """What setup loaded and decided."""
        if self._plan is None:
            raise RuntimeError("TrainingRun.setup() has not run")
        return self._plan

    @property
    def run_dir(self) -> RunDir:
        """The run directory (after setup)."""
        return self._open().run_dir

    @property
    def events(self) -> EventWriter:
        """The run's event log (after setup, until cleanup)."""
        return self._open().events

    def _open(self) -> _Opened:
        if self._opened is None:
            raise RuntimeError("TrainingRun.setup() has not opened the run directory")
        return self._opened

    def _training(self) -> _Trained:
        if self._trained is None:
            raise RuntimeError("TrainingRun.train() has not finished")
        return self._trained

    # --- the steps ------------------------------------------------------------------------------

    def setup(self) -> None:
        """Check and load everything, then create (or reopen) the run directory and open its event log.

        On several processes rank 0 goes first (it also fills the tokenization cache the others
        then read) and tells the others whether it could start; they plan after it.
        """
        ranks = self.ranks
        hardware = self._hardware or detect_hardware()
        init_process_group(ranks, device_type_of(hardware.backend))  # joined already under the engine child
        # Where each process runs, recorded in the run's config (the job page lists it).
        self._placements = gather_from_all(ranks, rank_placement(ranks, device_type_of(hardware.backend)))
        if ranks.is_main:
            try:
                self._plan = plan_run(self.spec, hardware, self._hub)
                run_dir = open_run_dir(self.spec, self.plan, self._preflight, self._placements)
            except BaseException as error:
                if ranks.distributed:
                    broadcast_from_main(ranks, f"{type(error).__name__}: {error}")
                raise
            if ranks.distributed:
                broadcast_from_main(ranks, "")
            from tunedeck.engine.tracking.run_reporting import report_run

            # The trackers the job reports to, fed from this process's events only (rank 0's).
            self._opened = _Opened(run_dir, report_run(EventWriter(run_dir.events), self.spec, self.plan.config))
        else:
            refused: str = broadcast_from_main(ranks, None)
            if refused:
                raise MainRankRefusedError(f"rank 0 could not start the run: {refused}")
            self._plan = plan_run(self.spec, hardware, self._hub, check_out=False)
            self._opened = _Opened(RunDir(self.spec.out_dir), NullEventWriter())
        self.config = self.plan.config  # the spec's, or its accumulation for another number of processes
        self._announce()

    def evaluate_baseline(self) -> None:
        """Evaluate the untrained starting model on the validation data (none without a validation file).

        The experiment method: the starting point is measured first, with exactly the procedure used after
        training, and its outputs and configuration are kept (`baseline_eval.json`).
        """
        if self.spec.validation_path is None:
            return
        from tunedeck.eval.baseline import BaselineEvaluator

        events, loaded = self.events, self.plan.loaded
        events.emit(EventType.PHASE, name=Phase.BASELINE_EVAL.value, status="started")
        schema = self.config.output_schema
        evaluator = BaselineEvaluator.from_file(
            self.config, self.spec.validation_path, label2id=self.plan.data.label2id, schema=schema,
            # The schema's own required fields when it lists them; else the evaluator's default.
            required_fields=list(schema["required"]) if schema and isinstance(schema.get("required"), list) else None,
        )
        baseline = evaluator.run_baseline(loaded.model, loaded.tokenizer, self._evaluation_dir())
        self._baseline_metrics = dict(baseline.get("metrics") or {})
        events.emit(
            EventType.PHASE,
            name=Phase.BASELINE_EVAL.value,
            status="completed",
            metrics=numeric_metrics(baseline["metrics"]),
            procedure_sha256=baseline.get("procedure_sha256"),
        )
        self._evaluator = evaluator

    def train(self) -> RunResult:
        """Train (retrying out-of-memory with smaller micro-batches) and return the result so far.

        The status is "succeeded", or "paused"/"cancelled" when a stop was requested. A failure
        is recorded in the run directory and raised as `RunFailedError`; an interrupt is
        recorded and let through.
        """
        collation, logits_budget = self._announce_training_setup()
        args = self._arguments(self.config)
        callbacks = self._training_callbacks()
        built: list[TunedeckTrainer] = []
        build_trainer = self._trainer_factory(args, callbacks, collation, logits_budget, built)
        outcome = self._fit(build_trainer, built)
        train_points, eval_points = points_from_log_history(outcome.trainer.state.log_history)
        if callbacks.stop.requested is None:
            self._refuse_unchanged_weights(outcome.trainer, train_points, built)
        self._trained = _Trained(outcome.trainer, callbacks.generation_eval)
        result = self._training_result(outcome, callbacks)
        return self._close_training(result, callbacks.stop, train_points, eval_points)

    def _training_callbacks(self) -> _TrainingCallbacks:
        """The Trainer's callbacks, in the order they must run, with the ones `train` reads afterwards."""
        from tunedeck.engine.training.diagnosis import NanLossGuard, data_counts
        from tunedeck.engine.training.training_speed import TrainingSpeedMonitor

        config, plan, run_dir, events = self.config, self.plan, self.run_dir, self.events
        data = plan.data
        stop = StopRequestCallback(run_dir.stop_request, agree=self._agreement())
        check = ParameterChangeCheck(plan.loaded.model, plan.loaded.uses_peft, events)
        generation_eval = self._generation_eval_callback()
        callbacks: list[Any] = [
            # First: it adds the procedure's metrics to each evaluation's, before they are written or ranked.
            *([generation_eval] if generation_eval is not None else []),
            EventsCallback(events, run_dir, self._progress if self.ranks.is_main and self._progress else NullProgress(),
                           self.ranks),
            NanLossGuard(config, plan.precision, data_counts(data.reports)),
            stop,
            check,
        ]
        plateau = None
        if config.early_stopping_patience is not None and data.validation is not None:
            plateau = PlateauStoppingCallback(
                best_metric_name(config),
                config.greater_is_better,
                config.early_stopping_patience,
                config.early_stopping_threshold,
            )
            callbacks.append(plateau)
        # Built-in troubleshooting: the speed monitor goes last so its logging time includes the other
        # callbacks'; an out-of-memory retries with half the micro-batch and twice the accumulation.
        speed = TrainingSpeedMonitor(
            config,
            plan.precision,
            events,
            accelerator_total_bytes=plan.hardware.total_memory_bytes,
            backend=plan.hardware.backend,
        )
        callbacks.append(speed)
        return _TrainingCallbacks(callbacks, stop, plateau, speed, generation_eval)

    def _trainer_factory(
        self,
        args: TrainingArguments,
        callbacks: _TrainingCallbacks,
        collation: CollationChoice,
        logits_budget: LogitsBudget,
        built: list[TunedeckTrainer],
    ) -> Callable[[int, int], TunedeckTrainer]:
        """What builds the trainer for one attempt's micro-batch and accumulation (the OOM retry calls it
        again with smaller ones); each trainer built is appended to `built`, for the failure record."""
        from transformers.trainer_callback import PrinterCallback

        from tunedeck.engine.speedups.token_counting import token_counting
        from tunedeck.engine.training.trainer import TunedeckTrainer

        config, plan = self.config, self.plan
        loaded, data = plan.loaded, plan.data
        # Fast path: tokens seen are counted on the host, with no device read per step (and right for
        # packed rows, whose 4D mask the trainer's own count would sum as query/key pairs).
        count_tokens_on_host = True
        compute_metrics = self._compute_metrics()
        reference = self._preference_reference()

        def build_trainer(micro_batch: int, accumulation: int) -> TunedeckTrainer:
            attempt_args = args
            if (micro_batch, accumulation) != (config.batch_size, config.gradient_accumulation_steps):
                attempt_args = self._arguments(
                    config.model_copy(update={"batch_size": micro_batch, "gradient_accumulation_steps": accumulation})
                )
            if reference is not None:
                from tunedeck.engine.preference.trainers import build_preference_trainer

                attempt = build_preference_trainer(
                    config.task, model=loaded.model, reference=reference.model, args=attempt_args,
                    train=data.train.features, tokenizer=loaded.tokenizer, callbacks=callbacks.all,
                    validation=data.validation.features if data.validation is not None else None,
                    reference_free=config.reference_free,
                )
                attempt.remove_callback(PrinterCallback)
                built.append(attempt)
                return attempt  # type: ignore[no-any-return]  # TRL's trainer, with the same Trainer interface
            attempt = TunedeckTrainer(
                model=loaded.model,
                args=attempt_args,
                train_dataset=data.train,
                eval_dataset=data.validation,
                data_collator=callbacks.speed.wrap(token_counting(collation.collator, count_tokens_on_host)),
                processing_class=loaded.tokenizer,
                compute_metrics=compute_metrics,
                callbacks=callbacks.all,
                count_tokens_on_host=count_tokens_on_host,
                # Fast path: the training loss over labelled tokens only, chunk by chunk (same loss, less memory).
                chunked_loss=plan.chunked_loss.enabled,
                chunk_logits=logits_budget.chunk_logits,
            )
            # Progress goes to events and the progress sink; the trainer's own printing would duplicate it.
            attempt.remove_callback(PrinterCallback)
            built.append(attempt)
            return attempt

        return build_trainer

    def _compute_metrics(self) -> Callable[..., dict[str, float]] | None:
        """Accuracy at each evaluation for classification with labels; None otherwise (the loss alone)."""
        label2id = self.plan.data.label2id
        if self.config.task == "classification" and label2id:
            return accuracy_metrics({index: label for label, index in label2id.items()})
        return None

    def _fit(self, build_trainer: Callable[[int, int], TunedeckTrainer], built: list[TunedeckTrainer]) -> RetryOutcome:
        """Announce the training phase and run the trainer, sampling the system meanwhile; a failure is
        recorded in the run directory before it is raised."""
        from tunedeck.engine.training.oom_retry import GroupRestartError, train_with_oom_retry

        config, plan, run_dir, events = self.config, self.plan, self.run_dir, self.events
        events.emit(
            EventType.PHASE,
            name=Phase.TRAINING.value,
            status="started",
            total_steps=plan.derived.total_steps,
            resume_from=str(self.spec.resume_from) if self.spec.resume_from else None,
        )
        sampler = self._system_sampler()
        try:
            return train_with_oom_retry(
                build_trainer,
                config,
                plan.precision,
                model=plan.loaded.model,
                events=events,
                checkpoints_dir=run_dir.checkpoints,
                resume_from=self.spec.resume_from,
                processes=self.ranks.world_size,
                restart_group=self._restart_group if self.ranks.distributed else None,
                restarted=self.spec.oom_restart,
            )
        except GroupRestartError as error:  # every process restarts with a smaller micro-batch
            self._record_restart(error)
            raise
        except Exception as error:
            step = self._record_failure(error, built)
            raise RunFailedError(f"training failed at step {step}: {error}") from error
        except BaseException as error:  # interrupted: record it, and let the interrupt through
            self._record_failure(error, built)
            raise
        finally:
            if sampler is not None:
                sampler.stop()

    def _refuse_unchanged_weights(
        self, trainer: TunedeckTrainer, train_points: list[TrainPoint], built: list[TunedeckTrainer]
    ) -> None:
        """Weights that never moved are the starting model: the run failed, however it ended."""
        from tunedeck.engine.training.diagnosis import DiagnosedError

        never_updated = no_update_diagnosis(
            train_points, int(trainer.state.global_step), self.config, warmup_steps=self.plan.derived.warmup_steps
        )
        if never_updated is not None:
            step = self._record_failure(DiagnosedError(never_updated), built)
            raise RunFailedError(f"training failed at step {step}: {never_updated.message}")

    def _training_result(self, outcome: RetryOutcome, callbacks: _TrainingCallbacks) -> RunResult:
        """The run's result after training ("succeeded" until `_close_training` says otherwise)."""
        from tunedeck.engine.training.loss_normalisation import loss_normalisation

        trainer, output, loaded = outcome.trainer, outcome.output, self.plan.loaded
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        plateau = callbacks.plateau
        result = RunResult(
            status="succeeded",
            run_dir=self.run_dir.root,
            global_step=int(trainer.state.global_step),
            total_steps=self.plan.derived.total_steps,
            train_loss=finite(output.training_loss),
            first_loss=finite(losses[0]) if losses else None,
            last_loss=finite(losses[-1]) if losses else None,
            best_checkpoint=trainer.state.best_model_checkpoint,
            best_metric=finite(trainer.state.best_metric),
            stopped_early=plateau is not None and plateau.stopped_at is not None,
            loss_normalisation=loss_normalisation(trainer, self.config.task),
            model={
                "trainable_parameters": loaded.trainable_parameters,
                "total_parameters": loaded.total_parameters,
            },
        )
        result.diagnostics = {"training_speed": callbacks.speed.figures(), "batching": outcome.to_dict()}
        return result

    def _close_training(
        self, result: RunResult, stop: StopRequestCallback, train_points: list[TrainPoint], eval_points: list[EvalPoint]
    ) -> RunResult:
        """End the training phase: quality warnings after a full run, or the paused/cancelled status."""
        events, warmup_steps = self.events, self.plan.derived.warmup_steps
        if stop.requested is None:
            # Quality warnings: the run succeeds, and its events and results carry them.
            warnings = quality_diagnoses(train_points, eval_points, self.config, warmup_steps=warmup_steps)
            self._record_quality(warnings)
        if stop.requested is not None:
            result.status = "paused" if stop.requested == "pause" else "cancelled"
            events.emit(EventType.PHASE, name=Phase.TRAINING.value, status=result.status, step=result.global_step)
            return result
        events.emit(EventType.PHASE, name=Phase.TRAINING.value, status="completed", step=result.global_step)
        return result

    def evaluate(self) -> dict[str, float | None] | None:
        """The final evaluation of the trained model; None without validation data.

        The trainer's evaluation, plus (after a baseline) the baseline's procedure on the trained
        model, its metrics prefixed `eval_` where they are not already.
        """
        if self.plan.data.validation is None:
            return None
        trained, events = self._training(), self.events
        events.emit(EventType.PHASE, name=Phase.FINAL_EVAL.value, status="started")
        if trained.generation_eval is not None:
            trained.generation_eval.take_result()  # an earlier evaluation's, maybe on other weights (load-best)
        metrics = trained.trainer.evaluate()
        eval_metrics = {
            key: finite(value)
            for key, value in metrics.items()
            if isinstance(value, int | float)
            and key.startswith("eval_")
            and not key.endswith(_TIMING_SUFFIXES)
            and not key.startswith(_PROCEDURE_PREFIX)  # the final evaluation's own, unprefixed, follow
        }
        if self._evaluator is not None:
            # The same procedure as the baseline's, on the trained model (the experiment method).
            # With eval_generation_each_eval, trainer.evaluate() just ran the procedure on these weights.
            done = trained.generation_eval.take_result() if trained.generation_eval is not None else None
            final = self._evaluator.run_final(
                trained.trainer.model, self.plan.loaded.tokenizer, self._evaluation_dir(), evaluated=done
            )
            for key, value in numeric_metrics(final["metrics"]).items():
                eval_metrics.setdefault(key if key.startswith("eval_") else f"eval_{key}", value)
            self._check_guards(dict(final.get("metrics") or {}))
        events.emit(EventType.PHASE, name=Phase.FINAL_EVAL.value, status="completed", metrics=eval_metrics)
        return eval_metrics

    def save(self) -> Path:
        """Save the final model (or adapter) with its tokenizer and config to final/; returns that folder."""
        return save_final_model(self._training().trainer, self.plan.loaded.tokenizer, self.run_dir, self.ranks)

    def finish(self, result: RunResult) -> RunResult:
        """Write results.json and the RESULT event for `result` (rank 0); returns it."""
        if not self.ranks.is_main:
            return result
        if self.quality:
            result.diagnostics["quality"] = list(self.quality)
        return finish_run(self.run_dir, self.events, result, self.started)

    def cleanup(self) -> None:
        """Close the event log (when setup opened it) and drop this process's scratch; safe to call more than once."""
        if self._opened is not None:
            self._opened.events.close()
            if not self.ranks.is_main:
                shutil.rmtree(self._evaluation_dir(create=False), ignore_errors=True)

    # --- helpers --------------------------------------------------------------------------------

    def _evaluation_dir(self, *, create: bool = True) -> Path:
        """Where the evaluation procedure writes its files: the run directory on rank 0, scratch elsewhere.

        Every process runs the baseline and final procedures (their greedy outputs are the same
        everywhere, and the metrics must be too: each process ranks checkpoints and stops early
        on them); only rank 0's files are kept.
        """
        if self.ranks.is_main:
            return self.run_dir.root
        folder = self.run_dir.root / f".rank-{self.ranks.rank}"
        if create:
            folder.mkdir(exist_ok=True)
        return folder

    def _agreement(self) -> Callable[[int], int] | None:
        """How the processes agree on a stop request at each step (None on one process)."""
        ranks = self.ranks
        if not ranks.distributed:
            return None
        device_type = device_type_of(self.plan.hardware.backend)
        return lambda code: max_across_ranks(ranks, code, device_type)

    def _announce(self) -> None:
        """The first events: the preflight that ran before, what tokenization left out or changed, and a
        warning when validation rows repeat training rows."""
        events, contamination = self.events, self.plan.data.contamination
        if self._preflight is not None:
            events.emit(EventType.PHASE, name=Phase.PREFLIGHT.value, status="completed", report=self._preflight)
        for role, report in self.plan.data.reports.items():
            for warning in report.get("warnings") or []:
                events.emit(EventType.LOG, level="warning", message=f"{role} data: {warning}", split=role,
                            dropped_rows=report.get("dropped_row_names") or None)
        start = self.plan.loaded.start
        for note in start.notes if start is not None else ():
            events.emit(EventType.LOG, level="warning", message=f"init_from_job: {note}")
        if contamination and contamination.get("contaminated"):
            events.emit(
                EventType.LOG,
                level="warning",
                message="validation rows duplicate training rows: validation metrics will look better than they are",
                contamination=contamination.get("pairs_by_split"),
            )

    def _system_sampler(self) -> SystemSampler | None:
        """Host and device readings every `system_sample_seconds` while training, as `system` events (rank 0 only).

        None when sampling is off (0 seconds) or on another rank: one process speaks for the machine.
        """
        interval = self.spec.system_sample_seconds
        if interval <= 0 or not self.ranks.is_main:
            return None
        events = self.events
        sampler = SystemSampler(
            open_telemetry(self.plan.hardware),
            lambda reading: events.emit(EventType.SYSTEM, **reading),
            interval_s=interval,
        )
        sampler.start()
        return sampler

    def _announce_training_setup(self) -> tuple[CollationChoice, LogitsBudget]:
        """Log what training will use (model, packing, loss path); returns the collator choice and logits budget."""
        from tunedeck.config.packed_batches import describe_packed_steps
        from tunedeck.engine.training.batch_collation import choose_collator

        events, plan, loaded = self.events, self.plan, self.plan.loaded
        if plan.data.validation is None:
            events.emit(EventType.LOG, level="warning", message="no validation file: evaluation is skipped")
        events.emit(
            EventType.LOG,
            level="info",
            message="model loaded",
            trainable_parameters=loaded.trainable_parameters,
            total_parameters=loaded.total_parameters,
            precision=plan.precision,
            attn_implementation=loaded.attn_implementation,
        )
        collation = choose_collator(loaded, plan.data.packed, self.config)
        attention = collation.attention
        events.emit(
            EventType.LOG,
            level="info",
            message=f"packing: {collation.packing}" + (f" ({collation.reason})" if collation.reason else "")
            + (f", attention {attention.path} ({attention.reason})" if attention else ""),
            packing=collation.packing,
            packing_reason=collation.reason,
            packed_attention=attention.to_dict() if attention else None,
        )
        packed_steps = describe_packed_steps(self.spec.config, self.config)
        if packed_steps is not None:
            events.emit(EventType.LOG, level="info", message=packed_steps, micro_batch=self.config.batch_size,
                        gradient_accumulation_steps=self.config.gradient_accumulation_steps)
        strategy = plan.strategy
        events.emit(
            EventType.LOG,
            level="info",
            message=f"processes: {strategy.world_size}, strategy {strategy.strategy}"
            + (" with CPU offload" if strategy.cpu_offload else "") + f" ({strategy.reason})",
            distribution={**strategy.to_dict(), "ranks": self._placements},
        )
        checkpointing = plan.checkpointing
        events.emit(
            EventType.LOG,
            level="info",
            message=checkpointing.describe(),
            gradient_checkpointing=checkpointing.enabled,
            gradient_checkpointing_reason=checkpointing.reason,
        )
        chunked = plan.chunked_loss
        budget = self._logits_budget()
        vocab = getattr(loaded.model.get_output_embeddings(), "out_features", None) if chunked.enabled else None
        events.emit(
            EventType.LOG,
            level="info",
            message="chunked cross-entropy: "
            + (f"on; {budget.describe(vocab)}" if chunked.enabled else f"off ({chunked.reason})"),
            chunked_cross_entropy=chunked.enabled,
            chunked_cross_entropy_reason=chunked.reason,
            **({"chunked_cross_entropy_logits": budget.to_dict()} if chunked.enabled else {}),
        )
        return collation, budget

    def _logits_budget(self) -> LogitsBudget:
        """How many logits the chunked loss holds at once, from this device's headroom (see `chunk_logits_limit`)."""
        from tunedeck.engine.host.memory_headroom import step_headroom
        from tunedeck.engine.preflight.memory_cap import memory_cap_bytes

        fit = (self._preflight or {}).get("memory_fit")
        headroom, source = step_headroom(self.plan.hardware, fit, memory_cap_bytes(self.spec.memory_cap))
        return chunk_logits_limit(headroom, source)

    def _arguments(self, config: TrainingConfig) -> TrainingArguments:
        """The Trainer's arguments for `config` (the run's, or one with a smaller micro-batch)."""
        plan = self.plan
        return training_arguments(
            config, plan.derived, plan.hardware, plan.precision, self.run_dir.checkpoints,
            plan.data.validation is not None, plan.strategy,
        )

    def _preference_reference(self) -> ReferenceChoice | None:
        """For a preference task, its reference model (logged); None for the other tasks."""
        if not is_preference_task(self.config.task):
            return None
        from tunedeck.engine.preference.reference import choose_reference

        loaded = self.plan.loaded
        reference = choose_reference(self.config, loaded.model, loaded.uses_peft)
        self.events.emit(EventType.LOG, level="info", message=f"reference model: {reference.description}",
                         reference_model=reference.description)
        return reference

    def _generation_eval_callback(self) -> GenerationEvalCallback | None:
        """The callback running the baseline's procedure at each evaluation, when the job asks for it."""
        if not self.config.eval_generation_each_eval or self._evaluator is None or self.plan.data.validation is None:
            return None
        from tunedeck.engine.generation.generation_eval import GenerationEvalCallback

        return GenerationEvalCallback(self._evaluator, self.plan.loaded.tokenizer)

    def _record_quality(self, warnings: list[Diagnosis]) -> None:
        """Emit each quality warning (rank 0); `finish` keeps them in results.json."""
        for warning in warnings:
            if self.ranks.is_main:
                warning.emit(self.events)
            self.quality.append(warning.to_event_fields())

    def _check_guards(self, final_metrics: dict[str, Any]) -> None:
        """A `guard_regression` warning for each of the job's guards the final model breaks or loses ground on."""
        if not self.spec.guards:
            return
        from tunedeck.eval.guards import evaluate_guards, parse_guards

        verdicts = evaluate_guards(parse_guards(self.spec.guards), final_metrics, self._baseline_metrics)
        self._record_quality(guard_regression_diagnoses(verdicts, self._baseline_metrics))

    def _restart_group(self, micro_batch: int, accumulation: int, attempts: list[dict[str, Any]]) -> None:
        from tunedeck.engine.distributed.group_restart import record_oom_restart

        record_oom_restart(self.run_dir, micro_batch, accumulation, attempts)

    def _record_restart(self, error: DiagnosedError) -> None:
        """The out-of-memory retry goes into the event log (the launcher restarts the group next)."""
        if self.ranks.is_main:
            error.diagnosis.emit(self.events)
        else:
            self._append_rank_diagnosis(error.diagnosis.to_event_fields())

    def _record_failure(self, error: BaseException, built: list[TunedeckTrainer]) -> int:
        plan = self.plan
        if self.ranks.distributed and self.run_dir.oom_restart.is_file():
            # A peer ran out of memory and asked every process to restart: this failure (a
            # collective cut short) is its consequence, and the restart goes on with the run.
            return int(built[-1].state.global_step) if built else 0
        if not self.ranks.is_main:
            return self._record_rank_failure(error, built)
        return record_failure(
            self.run_dir, self.events, error, built, self.config, plan.precision,
            plan.derived.total_steps, self.started,
        )

    def _record_rank_failure(self, error: BaseException, built: list[TunedeckTrainer]) -> int:
        """A process other than rank 0 failed: its diagnosis goes into the run's event log, naming the rank.

        Its launcher stops the others next, so this is often the only account of the failure;
        one short line appended in one write does not interleave with rank 0's.
        """
        from tunedeck.engine.training.diagnosis import diagnose_failure

        step = int(built[-1].state.global_step) if built else 0
        diagnosis = diagnose_failure(error, self.config, self.plan.precision, step=step)
        self._append_rank_diagnosis(diagnosis.to_event_fields())
        return step

    def _append_rank_diagnosis(self, fields: dict[str, Any]) -> None:
        """A diagnosis from a process other than rank 0, naming its rank, appended to the run's event log."""
        if self.run_dir.events.is_file():
            with EventWriter(self.run_dir.events) as events:
                events.emit(EventType.DIAGNOSIS, **fields, rank=self.ranks.rank)


def run_training(
    spec: RunSpec,
    *,
    hardware: HardwareProfile | None = None,
    hub: HubResolver | None = None,
    progress: ProgressSink | None = None,
    preflight: dict[str, Any] | None = None,
    ranks: Ranks | None = None,
) -> RunResult:
    """Train as `spec` says and return how it ended; the run directory holds everything else.

    `preflight` is the report of the checks run just before (the job's first phase): it is
    kept in the run directory with the memory-fit decision it applied. `ranks` is this
    process's place in a multi-process run (default: from the launcher's environment).
    """
    run = TrainingRun(spec, hardware=hardware, hub=hub, progress=progress, preflight=preflight, ranks=ranks)
    try:
        run.setup()
        run.evaluate_baseline()
        result = run.train()
        if result.status == "succeeded":  # a paused or cancelled run is evaluated and saved when it completes
            metrics = run.evaluate()
            if metrics is not None:
                result.eval_metrics = metrics
            result.final_path = run.save()
        result = run.finish(result)
    finally:
        run.cleanup()
    # Only a run that ended normally tears the group down: after a failure a peer may still be
    # inside a collective, and the teardown would wait for it; the launcher ends the others instead.
    destroy_process_group(run.ranks)
    return result
