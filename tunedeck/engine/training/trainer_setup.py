"""Translating a `TrainingConfig` into the trainer's arguments, exactly as the job config contract means each key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunedeck.config.derived import DerivedValues
from tunedeck.config.preference import is_preference_task
from tunedeck.config.training import TrainingConfig, gradient_checkpointing_on
from tunedeck.engine.distributed.strategy import StrategyChoice
from tunedeck.engine.host.hardware import HardwareProfile, trainer_optimizer


def best_metric_name(config: TrainingConfig) -> str:
    """`metric_for_best_model` as evaluation reports it (with the eval_ prefix)."""
    name = config.metric_for_best_model
    return name if name.startswith("eval_") else f"eval_{name}"


def training_arguments(
    config: TrainingConfig,
    derived: DerivedValues,
    hardware: HardwareProfile,
    precision: str,
    checkpoints_dir: Path,
    has_validation: bool,
    strategy: StrategyChoice | None = None,
) -> Any:
    """The trainer's arguments for one run.

    Warmup is passed as whole steps computed by `derive_values` (the trainer no longer takes
    a ratio, and the run records the same number it uses). Evaluation is off without a
    validation set; the caller has already refused early stopping and load-best then. A
    preference task gets its trainer's own arguments class, with the task's settings.
    """
    from transformers import TrainingArguments

    arguments_class: type[Any] = TrainingArguments
    task_settings: dict[str, Any] = {}
    if is_preference_task(config.task):
        from tunedeck.engine.preference.arguments import preference_arguments

        arguments_class, task_settings = preference_arguments(config)

    optim = trainer_optimizer(config.optim, hardware)  # first: an optimizer that cannot run here is refused
    sharded = strategy is not None and strategy.strategy == "fsdp"
    # Under fsdp, activation checkpointing is FSDP's own (it must wrap the sharded layers).
    checkpointing = gradient_checkpointing_on(config) and not sharded
    return arguments_class(
        **distribution_arguments(config, strategy),
        **task_settings,
        output_dir=str(checkpoints_dir),
        optim=optim,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=derived.warmup_steps,
        lr_scheduler_type=config.lr_scheduler,
        lr_scheduler_kwargs=_scheduler_kwargs(config),
        max_grad_norm=config.max_grad_norm,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        # The trainer's current name for gradient checkpointing (the old one is deprecated).
        activation_checkpointing=checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False} if checkpointing else None,
        **_evaluation_arguments(config, has_validation),
        save_strategy=config.save_strategy,
        save_steps=config.save_steps,
        logging_strategy="steps",
        logging_steps=config.logging_steps,
        logging_nan_inf_filter=False,  # a NaN loss must be seen, not averaged away
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=hardware.backend == "cpu",
        # Trackers (the job's report_to) are fed from tunedeck's events instead (tunedeck.engine.tracking),
        # so they also get the baseline and final evaluations and the link to the job.
        report_to="none",
        disable_tqdm=True,
        remove_unused_columns=False,
        label_names=["labels"],
        include_num_input_tokens_seen="non_padding",
        dataloader_num_workers=0,
        dataloader_pin_memory=hardware.backend in ("cuda", "rocm"),
        # Off by default: compile time and graph breaks vary by model and hardware, so it is
        # turned on per job once a benchmark on that hardware shows it pays back.
        torch_compile=config.torch_compile,
    )


def _scheduler_kwargs(config: TrainingConfig) -> dict[str, Any]:
    """The learning-rate scheduler's own arguments (none but for "polynomial")."""
    if config.lr_scheduler == "polynomial":
        # Decay to exactly zero, as "linear" does; the trainer's default ends at 1e-7.
        return {"power": config.polynomial_power, "lr_end": 0.0}
    return {}


def _evaluation_arguments(config: TrainingConfig, has_validation: bool) -> dict[str, Any]:
    """Evaluation and keeping the best checkpoint: on only with a validation set and an evaluation strategy."""
    evaluate = has_validation and config.eval_strategy != "no"
    return {
        "eval_strategy": config.eval_strategy if evaluate else "no",
        "eval_steps": config.eval_steps if evaluate and config.eval_strategy == "steps" else None,
        "load_best_model_at_end": config.load_best_model_at_end and evaluate,
        "metric_for_best_model": best_metric_name(config) if evaluate else None,
        "greater_is_better": config.greater_is_better if evaluate else None,
    }


def distribution_arguments(config: TrainingConfig, strategy: StrategyChoice | None) -> dict[str, Any]:
    """The trainer's arguments for the run's strategy: nothing on one process, DDP's or FSDP2's otherwise.

    Under DDP every trained parameter takes part in every step (adapters, heads), so the search for
    unused ones, a full pass over the graph each step, is off. Under FSDP2 each decoder layer is
    sharded on its own; checkpoints are sharded too (each process writes its shard with
    `torch.distributed.checkpoint`), which is what lets a run resume on another number of processes.
    """
    if strategy is None or strategy.strategy == "none":
        return {}
    if strategy.strategy == "ddp":
        return {"ddp_find_unused_parameters": False}
    options = "full_shard auto_wrap" + (" offload" if strategy.cpu_offload else "")
    return {
        "fsdp": options,
        "fsdp_config": {
            "version": 2,
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "reshard_after_forward": config.fsdp_reshard_after_forward,
            "activation_checkpointing": gradient_checkpointing_on(config),
            "state_dict_type": "SHARDED_STATE_DICT",
            "cpu_ram_efficient_loading": False,
        },
    }


def accuracy_metrics(id2label: dict[int, str]) -> Any:
    """A `compute_metrics` for classification: accuracy and macro-F1 over the declared labels."""
    from tunedeck.eval.metrics.classification import classification_metrics

    labels = [id2label[index] for index in sorted(id2label)]

    def compute(prediction: Any) -> dict[str, float]:
        import numpy as np

        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        predicted = np.asarray(logits).argmax(axis=-1)
        truth = np.asarray(prediction.label_ids)
        report = classification_metrics(
            [id2label[int(i)] for i in truth], [id2label[int(i)] for i in predicted], labels
        )
        return {"accuracy": report.accuracy, "macro_f1": report.macro_f1}

    return compute
