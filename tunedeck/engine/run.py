"""`run_training`: one training run from spec to run directory, on the transformers Trainer.

Order matters: every check that can fail on bad input (config, hardware, model, data,
max_length, resume point) runs before the run directory exists, so a refused run leaves
nothing behind. From the first event on, failures are recorded in the run directory
(a diagnosis event and results.json) because the run may be resumed.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tunedeck.config.derived import derive_values
from tunedeck.config.training import GENERATION_METRIC_PREFIX, TrainingConfig
from tunedeck.core.errors import ConfigError, Issue, TunedeckError
from tunedeck.core.events import EventType, EventWriter, Phase
from tunedeck.core.rundir import RunDir
from tunedeck.engine.callbacks import (
    PICKLED_ARGS,
    EventsCallback,
    NullProgress,
    ParameterChangeCheck,
    PlateauStoppingCallback,
    ProgressSink,
    StopRequestCallback,
)
from tunedeck.engine.chunked_loss import ChunkedLossChoice, decide_chunked_loss, with_chunked_loss
from tunedeck.engine.environment import capture_environment
from tunedeck.engine.hardware import HardwareProfile, detect_hardware, resolve_precision
from tunedeck.engine.model_loading import check_max_length, load_model, load_tokenizer, read_model_config
from tunedeck.engine.model_source import HubResolver, resolve_model
from tunedeck.engine.pinning import pin_model_folder
from tunedeck.engine.run_directory import (
    check_checkpoint,
    check_out_dir,
    check_resume_config,
    create_run_dir,
    write_json_atomic,
)
from tunedeck.engine.run_spec import RunResult, RunSpec
from tunedeck.engine.trainer_setup import accuracy_metrics, best_metric_name, training_arguments
from tunedeck.engine.training_data import pack_splits, prepare_data

_TIMING_SUFFIXES = ("_runtime", "_per_second")
_PROCEDURE_PREFIX = f"eval_{GENERATION_METRIC_PREFIX}"


class RunFailedError(TunedeckError):
    """Training started and then failed; the run directory holds a diagnosis and results.json."""


def check_evaluation_needs(config: TrainingConfig, has_validation: bool) -> None:
    """Early stopping and load-best rank evaluations: without a validation file they cannot run."""
    if has_validation:
        return
    issues = []
    if config.early_stopping_patience is not None:
        issues.append(Issue("early stopping needs a validation file (--validation)", field="early_stopping_patience"))
    if config.load_best_model_at_end:
        issues.append(Issue("load-best needs a validation file (--validation)", field="load_best_model_at_end"))
    if issues:
        raise ConfigError(issues)


def run_training(
    spec: RunSpec,
    *,
    hardware: HardwareProfile | None = None,
    hub: HubResolver | None = None,
    progress: ProgressSink | None = None,
    preflight: dict[str, Any] | None = None,
) -> RunResult:
    """Train as `spec` says and return how it ended; the run directory holds everything else.

    `preflight` is the report of the checks run just before (the job's first phase): it is
    kept in the run directory with the memory-fit decision it applied.
    """
    from transformers import Trainer, set_seed

    started = time.monotonic()
    config = spec.config
    hardware = hardware or detect_hardware()
    precision = resolve_precision(config.mixed_precision, hardware)
    has_validation = spec.validation_path is not None
    check_evaluation_needs(config, has_validation)
    resuming = spec.resume_from is not None
    check_out_dir(spec.out_dir, resuming)
    if spec.resume_from is not None:
        check_checkpoint(spec.resume_from)
    resolved = resolve_model(spec.model, hub)
    check_max_length(config, read_model_config(resolved, config))
    tokenizer = load_tokenizer(resolved, config)
    data = prepare_data(config, tokenizer, spec.train_path, spec.validation_path, spec.cache_dir)
    set_seed(config.seed)  # LoRA and head initialisation draw from the seeded generator
    loaded = load_model(resolved, config, hardware, precision, tokenizer, data.label2id)
    if config.packing is True:
        from tunedeck.engine.packed_attention import require_packing_support

        require_packing_support(loaded.model, config.max_length)
        pack_splits(data, config.max_length)
    # Before the run directory exists: chunked_cross_entropy true on a model it does not fit is bad input.
    chunked_loss = decide_chunked_loss(loaded.model, config, spec.processes)
    derived = derive_values(config, len(data.train), spec.processes)
    config_doc = config.to_json_dict()
    resolved_doc = {
        "config": config_doc,
        "derived": {
            **derived.to_dict(),
            "resolved_precision": precision,
            "processes": spec.processes,
            **({"memory_fit": preflight.get("memory_fit")} if preflight is not None else {}),
        },
        "model": {**resolved.to_dict(), **loaded.summary()},
        "task": config.task,
        "data_kind": data.kind,
        "label2id": data.label2id,
        "validation": has_validation and config.eval_strategy != "no",
    }
    if resuming and RunDir(spec.out_dir).config.is_file():
        run_dir = RunDir(spec.out_dir)
        check_resume_config(run_dir, config_doc)
    else:
        run_dir = create_run_dir(
            spec.out_dir,
            {
                "config.json": resolved_doc,
                "env.json": capture_environment(hardware, spec.processes, seed=config.seed),
                "data_manifest.json": {
                    "datasets": data.manifests,
                    "tokenization": data.reports,
                    "contamination": data.contamination,
                },
                **({"preflight.json": preflight} if preflight is not None else {}),
            },
        )
    events = EventWriter(run_dir.events)
    try:
        if preflight is not None:
            events.emit(EventType.PHASE, name=Phase.PREFLIGHT.value, status="completed", report=preflight)
        if data.contamination and data.contamination.get("contaminated"):
            events.emit(
                EventType.LOG,
                level="warning",
                message="validation rows duplicate training rows: validation metrics will look better than they are",
                contamination=data.contamination.get("pairs_by_split"),
            )
        evaluator = _baseline_evaluation(spec, run_dir, events, loaded, data)
        return _train(
            spec,
            run_dir,
            events,
            loaded,
            data,
            derived,
            hardware,
            precision,
            progress,
            started,
            Trainer,
            evaluator,
            chunked_loss,
        )
    finally:
        events.close()


def _train(
    spec: RunSpec,
    run_dir: RunDir,
    events: EventWriter,
    loaded: Any,
    data: Any,
    derived: Any,
    hardware: HardwareProfile,
    precision: str,
    progress: ProgressSink | None,
    started: float,
    trainer_class: Any,
    evaluator: Any,
    chunked_loss: ChunkedLossChoice,
) -> RunResult:
    from transformers.trainer_callback import PrinterCallback

    from tunedeck.engine.diagnosis import NanLossGuard, data_counts
    from tunedeck.engine.fast_paths import host_token_count

    config = spec.config
    # Fast path: tokens seen are counted on the host, with no device read per step.
    trainer_class, count_tokens = host_token_count(trainer_class, spec.processes)
    if chunked_loss.enabled:
        # Fast path: the training loss over labelled tokens only, chunk by chunk (same loss, less memory).
        trainer_class = with_chunked_loss(trainer_class)
    if data.validation is None:
        events.emit(EventType.LOG, level="warning", message="no validation file: evaluation is skipped")
    events.emit(
        EventType.LOG,
        level="info",
        message="model loaded",
        trainable_parameters=loaded.trainable_parameters,
        total_parameters=loaded.total_parameters,
        precision=precision,
        attn_implementation=loaded.attn_implementation,
    )
    from tunedeck.engine.batch_collation import choose_collator

    collation = choose_collator(loaded, data.packed, config)
    events.emit(
        EventType.LOG,
        level="info",
        message=f"packing: {collation.packing}" + (f" ({collation.reason})" if collation.reason else ""),
        packing=collation.packing,
        packing_reason=collation.reason,
    )
    events.emit(
        EventType.LOG,
        level="info",
        message="chunked cross-entropy: " + ("on" if chunked_loss.enabled else f"off ({chunked_loss.reason})"),
        chunked_cross_entropy=chunked_loss.enabled,
        chunked_cross_entropy_reason=chunked_loss.reason,
    )
    args = training_arguments(config, derived, hardware, precision, run_dir.checkpoints, data.validation is not None)
    stop = StopRequestCallback(run_dir.stop_request)
    check = ParameterChangeCheck(loaded.model, loaded.uses_peft, events)
    generation_eval = _generation_eval_callback(config, evaluator, loaded.tokenizer, data.validation is not None)
    callbacks: list[Any] = [
        # First: it adds the procedure's metrics to each evaluation's, before they are written or ranked.
        *([generation_eval] if generation_eval is not None else []),
        EventsCallback(events, run_dir, progress or NullProgress()),
        NanLossGuard(config, precision, data_counts(data.reports)),
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
    compute_metrics = None
    if config.task == "classification" and data.label2id:
        compute_metrics = accuracy_metrics({index: label for label, index in data.label2id.items()})
    # Built-in troubleshooting: the speed monitor goes last so its logging time includes the other
    # callbacks'; an out-of-memory retries with half the micro-batch and twice the accumulation.
    from tunedeck.engine.oom_retry import train_with_oom_retry
    from tunedeck.engine.training_speed import TrainingSpeedMonitor

    speed = TrainingSpeedMonitor(
        config, precision, events, accelerator_total_bytes=hardware.total_memory_bytes, backend=hardware.backend
    )
    callbacks.append(speed)
    built: list[Any] = []

    def build_trainer(micro_batch: int, accumulation: int) -> Any:
        attempt_args = args
        if (micro_batch, accumulation) != (config.batch_size, config.gradient_accumulation_steps):
            smaller = config.model_copy(update={"batch_size": micro_batch, "gradient_accumulation_steps": accumulation})
            attempt_args = training_arguments(
                smaller, derived, hardware, precision, run_dir.checkpoints, data.validation is not None
            )
        attempt = trainer_class(
            model=loaded.model,
            args=attempt_args,
            train_dataset=data.train,
            eval_dataset=data.validation,
            data_collator=speed.wrap(count_tokens(collation.collator)),
            processing_class=loaded.tokenizer,
            compute_metrics=compute_metrics,
            callbacks=callbacks,
        )
        # Progress goes to events and the progress sink; the trainer's own printing would duplicate it.
        attempt.remove_callback(PrinterCallback)
        built.append(attempt)
        return attempt

    events.emit(
        EventType.PHASE,
        name=Phase.TRAINING.value,
        status="started",
        total_steps=derived.total_steps,
        resume_from=str(spec.resume_from) if spec.resume_from else None,
    )
    try:
        outcome = train_with_oom_retry(
            build_trainer,
            config,
            precision,
            model=loaded.model,
            events=events,
            checkpoints_dir=run_dir.checkpoints,
            resume_from=spec.resume_from,
        )
    except Exception as error:
        step = _record_failure(run_dir, events, error, built, config, precision, derived.total_steps, started)
        raise RunFailedError(f"training failed at step {step}: {error}") from error
    except BaseException as error:  # interrupted: record it, and let the interrupt through
        _record_failure(run_dir, events, error, built, config, precision, derived.total_steps, started)
        raise
    trainer, output = outcome.trainer, outcome.output
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    result = RunResult(
        status="succeeded",
        run_dir=run_dir.root,
        global_step=int(trainer.state.global_step),
        total_steps=derived.total_steps,
        train_loss=_finite(output.training_loss),
        first_loss=_finite(losses[0]) if losses else None,
        last_loss=_finite(losses[-1]) if losses else None,
        best_checkpoint=trainer.state.best_model_checkpoint,
        best_metric=_finite(trainer.state.best_metric),
        stopped_early=plateau is not None and plateau.stopped_at is not None,
        model={
            "trainable_parameters": loaded.trainable_parameters,
            "total_parameters": loaded.total_parameters,
        },
    )
    result.diagnostics = {"training_speed": speed.figures(), "batching": outcome.to_dict()}
    if stop.requested is not None:
        result.status = "paused" if stop.requested == "pause" else "cancelled"
        events.emit(EventType.PHASE, name=Phase.TRAINING.value, status=result.status, step=result.global_step)
        return _finish(run_dir, events, result, started)
    events.emit(EventType.PHASE, name=Phase.TRAINING.value, status="completed", step=result.global_step)
    if data.validation is not None:
        events.emit(EventType.PHASE, name=Phase.FINAL_EVAL.value, status="started")
        if generation_eval is not None:
            generation_eval.take_result()  # an earlier evaluation's, maybe on other weights (load-best)
        metrics = trainer.evaluate()
        result.eval_metrics = {
            key: _finite(value)
            for key, value in metrics.items()
            if isinstance(value, int | float)
            and key.startswith("eval_")
            and not key.endswith(_TIMING_SUFFIXES)
            and not key.startswith(_PROCEDURE_PREFIX)  # the final evaluation's own, unprefixed, follow
        }
        if evaluator is not None:
            # The same procedure as the baseline's, on the trained model (the experiment method).
            # With eval_generation_each_eval, trainer.evaluate() just ran the procedure on these weights.
            done = generation_eval.take_result() if generation_eval is not None else None
            final = evaluator.run_final(trainer.model, loaded.tokenizer, run_dir.root, evaluated=done)
            for key, value in _numeric_metrics(final["metrics"]).items():
                result.eval_metrics.setdefault(key if key.startswith("eval_") else f"eval_{key}", value)
        events.emit(EventType.PHASE, name=Phase.FINAL_EVAL.value, status="completed", metrics=result.eval_metrics)
    result.final_path = _save_final(trainer, loaded.tokenizer, run_dir)
    return _finish(run_dir, events, result, started)


def _baseline_evaluation(spec: RunSpec, run_dir: RunDir, events: EventWriter, loaded: Any, data: Any) -> Any:
    """Evaluate the untrained starting model on the validation data; returns the evaluator for the end.

    The experiment method: the starting point is measured first, with exactly the procedure used after
    training, and its outputs and configuration are kept (`baseline_eval.json`).
    """
    if spec.validation_path is None:
        return None
    from tunedeck.eval.baseline import BaselineEvaluator

    events.emit(EventType.PHASE, name=Phase.BASELINE_EVAL.value, status="started")
    schema = spec.config.output_schema
    evaluator = BaselineEvaluator.from_file(
        spec.config, spec.validation_path, label2id=data.label2id, schema=schema,
        # The schema's own required fields when it lists them; else the evaluator's default.
        required_fields=list(schema["required"]) if schema and isinstance(schema.get("required"), list) else None,
    )
    baseline = evaluator.run_baseline(loaded.model, loaded.tokenizer, run_dir.root)
    events.emit(
        EventType.PHASE,
        name=Phase.BASELINE_EVAL.value,
        status="completed",
        metrics=_numeric_metrics(baseline["metrics"]),
        procedure_sha256=baseline.get("procedure_sha256"),
    )
    return evaluator


def _generation_eval_callback(config: TrainingConfig, evaluator: Any, tokenizer: Any, has_validation: bool) -> Any:
    """The callback running the baseline's procedure at each evaluation, when the job asks for it."""
    if not config.eval_generation_each_eval or evaluator is None or not has_validation:
        return None
    from tunedeck.engine.generation_eval import GenerationEvalCallback

    return GenerationEvalCallback(evaluator, tokenizer)


def _numeric_metrics(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The top-level numeric metrics of an evaluation (per-class tables stay in the eval files)."""
    return {
        key: _finite(value)
        for key, value in metrics.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def _save_final(trainer: Any, tokenizer: Any, run_dir: RunDir) -> Path:
    """Save the final model (or adapter) beside a staging name, then rename it to final/."""
    staging = run_dir.root / ".final.partial"
    shutil.rmtree(staging, ignore_errors=True)
    trainer.save_model(str(staging))
    (staging / PICKLED_ARGS).unlink(missing_ok=True)
    tokenizer.save_pretrained(str(staging))
    shutil.copyfile(run_dir.config, staging / "tunedeck_config.json")
    pin_model_folder(staging)  # the adapter names its exact base: tunedeck_pin.json
    if run_dir.final.exists():
        shutil.rmtree(run_dir.final)
    os.replace(staging, run_dir.final)
    return run_dir.final


def _finish(run_dir: RunDir, events: EventWriter, result: RunResult, started: float) -> RunResult:
    result.runtime_seconds = time.monotonic() - started
    write_json_atomic(run_dir.results, result.to_dict())
    events.emit(EventType.RESULT, **result.to_dict())
    return result


def _record_failure(
    run_dir: RunDir,
    events: EventWriter,
    error: BaseException,
    trainers: list[Any],
    config: TrainingConfig,
    precision: str,
    total_steps: int,
    started: float,
) -> int:
    """Write the diagnosis and a failed results.json; returns the step reached (0 if no trainer was built)."""
    from tunedeck.engine.diagnosis import diagnose_failure

    step = int(trainers[-1].state.global_step) if trainers else 0
    diagnose_failure(error, config, precision, step=step).emit(events)
    result = RunResult(status="failed", run_dir=run_dir.root, global_step=step, total_steps=total_steps)
    result.runtime_seconds = time.monotonic() - started
    write_json_atomic(run_dir.results, {**result.to_dict(), "error": f"{type(error).__name__}: {error}"})
    return step


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None
