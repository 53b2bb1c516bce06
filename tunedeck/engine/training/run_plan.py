"""Everything a run checks, loads and decides before its run directory exists, and opening that directory.

Every check that can fail on bad input (config, hardware, model, data, max_length, resume
point) runs in `plan_run`, so a refused run leaves nothing behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.config.derived import DerivedValues, derive_values, schedule_refusals
from tunedeck.config.packed_batches import packed_row_steps
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.model_licence import read_model_licence
from tunedeck.core.rundir import CHECKPOINT_CONFIG, RunDir
from tunedeck.engine.distributed.sharded_checkpoint import find_sharded_model
from tunedeck.engine.distributed.strategy import StrategyChoice, choose_strategy, training_state_bytes
from tunedeck.engine.host.environment import capture_environment
from tunedeck.engine.host.hardware import HardwareProfile, detect_hardware, resolve_precision
from tunedeck.engine.models.init_from import require_starting_model
from tunedeck.engine.models.model_loading import (
    LoadedModel,
    check_max_length,
    load_model,
    load_tokenizer,
    read_model_config,
)
from tunedeck.engine.models.model_source import HubResolver, ResolvedModel, resolve_model
from tunedeck.engine.speedups.chunked_loss import ChunkedLossChoice, decide_chunked_loss
from tunedeck.engine.training.checkpointing_choice import (
    REASON_KEY,
    RESOLVED_KEY,
    CheckpointingChoice,
    run_checkpointing,
    with_checkpointing,
)
from tunedeck.engine.training.run_directory import check_checkpoint, check_out_dir, check_resume_config, create_run_dir
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.task_data import prepare_task_data
from tunedeck.engine.training.training_data import PreparedData, pack_splits


@dataclass(frozen=True)
class RunPlan:
    """What was checked, loaded and decided before the run directory existed.

    `config` is the one the run trains with: the spec's, with the gradient accumulation that
    keeps the global batch when a run resumes on another number of processes, and
    gradient_checkpointing resolved (`checkpointing` says how; the spec's config keeps "auto").
    """

    config: TrainingConfig
    hardware: HardwareProfile
    precision: str
    resolved: ResolvedModel
    loaded: LoadedModel
    data: PreparedData
    chunked_loss: ChunkedLossChoice
    derived: DerivedValues
    strategy: StrategyChoice
    checkpointing: CheckpointingChoice


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


def plan_run(
    spec: RunSpec, hardware: HardwareProfile | None, hub: HubResolver | None, *, check_out: bool = True
) -> RunPlan:
    """Check the spec, resolve and load the model and data, and decide precision, packing and the loss path.

    `check_out` false skips the check that a new run's folder is empty: the processes other
    than rank 0 plan after rank 0 has created it.
    """
    from transformers import set_seed

    config = spec.config
    hardware = hardware or detect_hardware()
    precision = resolve_precision(config.mixed_precision, hardware)
    check_evaluation_needs(config, spec.validation_path is not None)
    require_starting_model(config, spec.init_from)
    if check_out:
        # A restart after an out-of-memory goes on in its own run directory, as a resumed run does.
        check_out_dir(spec.out_dir, spec.resume_from is not None or spec.oom_restart is not None)
    if spec.resume_from is not None:
        check_checkpoint(spec.resume_from)
        config = accumulation_for_processes(config, spec.resume_from, spec.processes)
    # Before the model loads: a 4-bit base is prepared for checkpointing or not.
    checkpointing = run_checkpointing(config, spec.gradient_checkpointing, spec.resume_from)
    config = with_checkpointing(config, checkpointing.enabled)
    resolved = resolve_model(spec.model, hub)
    check_max_length(config, read_model_config(resolved, config))
    tokenizer = load_tokenizer(resolved, config)
    data = prepare_task_data(config, tokenizer, spec.train_path, spec.validation_path, spec.cache_dir)
    set_seed(config.seed)  # LoRA and head initialisation draw from the seeded generator
    loaded = load_model(resolved, config, hardware, precision, tokenizer, data.label2id, spec.init_from)
    if config.packing is True:
        from tunedeck.engine.speedups.packed_attention import require_packing_support

        require_packing_support(loaded.model, config.max_length)
        pack_splits(data, config.max_length)
        config = packed_row_steps(config)
    # Before the run directory exists: chunked_cross_entropy true on a model it does not fit is bad input.
    state = training_state_bytes(config, loaded.total_parameters, loaded.trainable_parameters, precision)
    strategy = choose_strategy(
        config, spec.processes, state_bytes=state, device_bytes=hardware.total_memory_bytes, backend=hardware.backend,
        resuming_shards=spec.resume_from is not None and find_sharded_model(spec.resume_from) is not None,
    )
    chunked_loss = decide_chunked_loss(loaded.model, config, spec.processes, strategy.strategy)
    derived = derive_values(config, len(data.train), spec.processes)
    refusals = schedule_refusals(config, derived, str(spec.train_path))
    if refusals:
        # No step, or every step at a learning rate of 0: the run would return its starting weights.
        raise ConfigError(refusals, title="this run would not train")
    return RunPlan(config, hardware, precision, resolved, loaded, data, chunked_loss, derived, strategy, checkpointing)


def accumulation_for_processes(config: TrainingConfig, checkpoint: Path, processes: int) -> TrainingConfig:
    """`config` with the gradient accumulation that keeps the checkpoint's global batch on `processes`.

    A run resumed on another number of processes must take the same samples per optimizer
    step, or its learning-rate schedule, step count and data order would no longer be the
    ones it started with: micro-batch × accumulation × processes stays what it was. A ConfigError
    says when no whole accumulation does that.
    """
    saved = checkpoint_processes(checkpoint)
    if saved is None or saved == processes:
        return config
    micro_batches = config.gradient_accumulation_steps * saved
    if micro_batches % processes:
        raise ConfigError([Issue(
            f"the checkpoint was written by {saved} processes with gradient_accumulation_steps "
            f"{config.gradient_accumulation_steps}: {micro_batches} micro-batches per step cannot be split evenly "
            f"over {processes} processes; resume on a number of processes that divides {micro_batches}",
            field="processes", file=str(checkpoint),
        )])
    return config.model_copy(update={"gradient_accumulation_steps": micro_batches // processes})


def checkpoint_processes(checkpoint: Path) -> int | None:
    """How many processes trained up to `checkpoint` (from the run config saved in it); None when unknown."""
    try:
        document = json.loads((checkpoint / CHECKPOINT_CONFIG).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    value = document.get("derived", {}).get("processes") if isinstance(document, dict) else None
    return int(value) if isinstance(value, int) and value >= 1 else None


def open_run_dir(
    spec: RunSpec, plan: RunPlan, preflight: dict[str, Any] | None, ranks: list[dict[str, Any]] | None = None
) -> RunDir:
    """Reopen the run directory to resume or restart, or create it with config.json, env.json and the data manifest.

    `preflight` (the report of the checks run just before) is kept as preflight.json, and its
    memory-fit decision in config.json, with the strategy and where each process (`ranks`) runs.
    """
    config = spec.config
    config_doc = config.to_json_dict()
    # A resumed run, or every process restarted after an out-of-memory (from the start, with no checkpoint yet).
    if (spec.resume_from is not None or spec.oom_restart is not None) and RunDir(spec.out_dir).config.is_file():
        run_dir = RunDir(spec.out_dir)
        check_resume_config(run_dir, config_doc)
        return run_dir
    resolved_doc = {
        "config": config_doc,
        "derived": {
            **plan.derived.to_dict(),
            "resolved_precision": plan.precision,
            RESOLVED_KEY: plan.checkpointing.enabled,
            REASON_KEY: plan.checkpointing.reason,
            "processes": spec.processes,
            "strategy": plan.strategy.to_dict(),
            "ranks": ranks or [],
            **({"memory_fit": preflight.get("memory_fit")} if preflight is not None else {}),
        },
        # The licence the base model's own files declare: the model card and the report show it.
        "model": {
            **plan.resolved.to_dict(),
            **plan.loaded.summary(),
            "licence": read_model_licence(plan.resolved.path).to_dict(),
        },
        "task": config.task,
        "data_kind": plan.data.kind,
        "label2id": plan.data.label2id,
        "validation": spec.validation_path is not None and config.eval_strategy != "no",
        # The job this run is (its pin names it) and the pin chain it started from (None: from the base).
        "job_id": spec.job_id,
        "lineage": spec.lineage,
        "init_from": plan.loaded.start.to_dict() if plan.loaded.start is not None else None,
    }
    data = plan.data
    return create_run_dir(
        spec.out_dir,
        {
            "config.json": resolved_doc,
            "env.json": capture_environment(plan.hardware, spec.processes, seed=config.seed),
            "data_manifest.json": {
                "datasets": data.manifests,
                "tokenization": data.reports,
                "contamination": data.contamination,
            },
            **({"preflight.json": preflight} if preflight is not None else {}),
        },
    )
