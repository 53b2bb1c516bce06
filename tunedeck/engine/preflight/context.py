"""What the preflight checks share: options, the pinned model, tokenizer, data and loaded model, and trial trainers.

Each check reads what earlier checks produced from `PreflightContext` and adds its own
results. A check whose input is missing (an earlier check failed) raises `SkipCheck`.
Trial trainers are built exactly as the run builds its trainer (same arguments, collator,
callbacks that matter), with only the schedule shortened, so preflight exercises the run's
own code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.config.packed_batches import packed_row_steps
from tunedeck.config.training import TrainingConfig, gradient_checkpointing_on
from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.host.memory_fit import DEFAULT_SAFETY_MARGIN, MemoryFitDecision
from tunedeck.engine.models.model_source import HubResolver
from tunedeck.engine.preflight.measure import MemoryProbe
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_data import ExampleDataset


@dataclass(frozen=True)
class PreflightOptions:
    """How much work each check does; the defaults suit a real model on a real GPU."""

    sample_examples: int = 3  # check 3: examples shown with their loss mask
    overfit_examples: int = 8  # check 5
    overfit_steps: int = 30
    overfit_min_drop: float = 0.30  # the loss must fall by at least this share
    overfit_learning_rate: float | None = None  # None: the config's rate, raised to a memorising floor
    throughput_steps: int = 8  # check 7: optimizer steps measured after the warm-up steps
    throughput_warmup_steps: int = 2
    safety_margin: float = DEFAULT_SAFETY_MARGIN
    step_length: str = "max_length"  # check 4: "max_length" (worst case the config allows) or "data"
    generate_tokens: int = 8
    time_budget_s: float | None = None  # check 8 fails when the projected run is longer
    disk_warn_share: float = 0.80  # check 2 and 8 warn above this share of free disk
    kept_checkpoints: int | None = None  # None: every checkpoint the run saves stays on local disk
    eval_sample_rows: int = 4  # check 7: validation rows the baseline evaluation is timed on
    numerics_tokens: int = 256  # checks 10 and 11: each example is cut to its last this many tokens


EARLIER_FAILURE = "not run: an earlier check failed"
RELEASED = "not run: the model was released after the checkpoint check"


class SkipCheck(Exception):
    """A check cannot run because an earlier one failed."""


@dataclass
class PreflightContext:
    """State shared by the checks of one preflight."""

    spec: RunSpec
    hardware: HardwareProfile
    options: PreflightOptions
    work_dir: Path
    memory_cap_bytes: int | None = None
    hub: HubResolver | None = None
    memory_probe: MemoryProbe | None = None  # accelerator probe; None uses the hardware's
    telemetry: Any = None  # a TelemetrySource; None opens the hardware's
    precision: str | None = None
    resolved: Any = None  # ResolvedModel
    tokenizer: Any = None
    data: Any = None  # PreparedData
    loaded: Any = None  # LoadedModel
    memory_fit: MemoryFitDecision | None = None
    step_seconds: float | None = None  # sustained, from check 7
    checkpoint_bytes: int | None = None  # measured in check 6
    final_bytes: int | None = None  # the weights in that checkpoint (what final/ will hold)
    eval_cost: Any = None  # EvalCost of the baseline/final evaluation, measured in check 7
    problems: dict[str, str] = field(default_factory=dict)
    reference: Any = None  # ReferenceChoice of a preference task, chosen once for the loaded model
    checkpointing: Any = None  # CheckpointingChoice: gradient_checkpointing as check 4 resolved it

    @property
    def config(self) -> TrainingConfig:
        """The job's config as the run trains it (whole-dataset packing: one packed row per micro-batch)."""
        return packed_row_steps(self.spec.config)

    @property
    def checkpointing_enabled(self) -> bool:
        """Whether the run recomputes activations: as check 4 resolved it, else as configured ("auto": on)."""
        if self.checkpointing is not None:
            return bool(self.checkpointing.enabled)
        return gradient_checkpointing_on(self.config)

    @property
    def run_config(self) -> TrainingConfig:
        """The job's config with gradient_checkpointing as the run will train (what trial trainers use)."""
        return trial_config(self.config, gradient_checkpointing=self.checkpointing_enabled)

    @property
    def preference(self) -> bool:
        """Whether the job trains a preference task (dpo, orpo, kto) on TRL's trainers."""
        from tunedeck.config.preference import is_preference_task

        return is_preference_task(self.config.task)

    @property
    def smallest_micro_batch(self) -> int:
        """The smallest micro-batch the task trains with (kto's KL term needs 2)."""
        from tunedeck.config.preference import smallest_micro_batch

        return smallest_micro_batch(self.config)

    @property
    def micro_batch(self) -> int:
        """The micro-batch the run will use (after the memory fit)."""
        return self.memory_fit.micro_batch if self.memory_fit is not None else self.config.batch_size

    @property
    def accumulation(self) -> int:
        """The accumulation the run will use (after the memory fit)."""
        if self.memory_fit is not None:
            return self.memory_fit.accumulation
        return self.config.gradient_accumulation_steps

    def require(self, *names: str) -> None:
        """Raise SkipCheck unless every named input (precision, resolved, tokenizer, data, loaded) exists."""
        for name in names:
            if getattr(self, name) is None:
                # A failure is told once, on the check that failed; a skip says only that it was not run,
                # unless its input is missing for another reason (released to free memory).
                why = self.problems.get(name)
                reason = why if why == RELEASED else EARLIER_FAILURE
                raise SkipCheck(f"{reason} (it needs the {_LABELS.get(name, name)})")

    def resolve(self) -> None:
        """Pin the base model once; a failure is kept for the checks that need it."""
        from tunedeck.core.errors import TunedeckError
        from tunedeck.engine.models.model_source import resolve_model

        if self.resolved is not None or "resolved" in self.problems:
            return
        try:
            self.resolved = resolve_model(self.spec.model, self.hub)
        except TunedeckError as error:
            self.problems["resolved"] = str(error)

    def data_counts(self) -> dict[str, int]:
        """The training split's data report counts (for NaN advice)."""
        from tunedeck.engine.training.diagnosis import data_counts

        return data_counts(self.data.reports) if self.data is not None else {}

    def trial_trainer(
        self,
        dataset: Any,
        output_dir: Path,
        *,
        micro_batch: int,
        accumulation: int,
        max_steps: int,
        save_steps: int | None = None,
        learning_rate: float | None = None,
        callbacks: list[Any] | None = None,
        collator: Any = None,
    ) -> Any:
        """A trainer built as the run builds it, for `max_steps` steps on `dataset`, at a constant rate.

        For a preference task it is the run's TRL trainer with the run's reference
        (`preference_reference`); `collator` applies to the other tasks only.
        """
        from transformers.trainer_callback import PrinterCallback

        from tunedeck.engine.speedups.chunked_loss import decide_chunked_loss
        from tunedeck.engine.training.batch_collation import training_collator
        from tunedeck.engine.training.diagnosis import NanLossGuard
        from tunedeck.engine.training.trainer import TunedeckTrainer

        self.require("loaded", "data", "precision")
        trial, args = self.trial_arguments(
            len(dataset), output_dir, micro_batch=micro_batch, accumulation=accumulation, max_steps=max_steps,
            save_steps=save_steps, learning_rate=learning_rate,
        )  # fmt: skip
        guard = NanLossGuard(trial, str(self.precision), self.data_counts())
        if self.preference:
            return self._preference_trainer(dataset, args, [guard, *(callbacks or [])])
        # The run's loss path, so the measured step memory and time are those the run will see.
        chunked = decide_chunked_loss(self.loaded.model, self.config, self.spec.processes).enabled
        trainer = TunedeckTrainer(
            model=self.loaded.model,
            args=args,
            train_dataset=dataset,
            data_collator=collator or training_collator(self.loaded, self.data.packed, self.config),
            processing_class=self.loaded.tokenizer,
            callbacks=[guard, *(callbacks or [])],
            # Trial collators are not wrapped for the host count: the trainer counts as it does by default.
            count_tokens_on_host=False,
            chunked_loss=chunked,
        )
        trainer.remove_callback(PrinterCallback)
        return trainer

    def trial_arguments(
        self,
        examples: int,
        output_dir: Path,
        *,
        micro_batch: int,
        accumulation: int,
        max_steps: int,
        save_steps: int | None = None,
        learning_rate: float | None = None,
    ) -> tuple[TrainingConfig, Any]:
        """(the trial's config, the run's trainer arguments for it): `max_steps` steps at a constant rate."""
        from tunedeck.config.derived import derive_values
        from tunedeck.engine.training.trainer_setup import training_arguments

        trial = trial_config(
            self.run_config,
            batch_size=micro_batch,
            gradient_accumulation_steps=accumulation,
            warmup_ratio=0.0,
            lr_scheduler="constant",
            logging_steps=1,
            save_strategy="steps" if save_steps else "no",
            save_steps=save_steps or self.config.save_steps,
            eval_strategy="no",
            load_best_model_at_end=False,
            early_stopping_patience=None,
            learning_rate=learning_rate or self.config.learning_rate,
        )
        derived = derive_values(trial, examples)
        args = training_arguments(trial, derived, self.hardware, str(self.precision), output_dir, False)
        args.max_steps = max_steps
        return trial, args

    def preference_scorer(self, model: Any, rows: list[dict[str, Any]], output_dir: Path) -> Any:
        """A preference trainer over `rows` for `model` (say, a reloaded checkpoint), only to compute its loss.

        It holds the reference this preflight chose (`preference_reference`), which outlives the
        loaded model, so the loss of the model that saved a checkpoint and of its reload compare.
        """
        self.require("data", "precision")
        if self.reference is None:
            raise SkipCheck("needs the preference reference, chosen with the loaded model")
        _, args = self.trial_arguments(len(rows), output_dir, micro_batch=max(1, len(rows)), accumulation=1,
                                       max_steps=1)  # fmt: skip
        return self._preference_trainer(ExampleDataset(rows), args, [], model=model)

    def preference_reference(self) -> Any:
        """The run's reference for the loaded model (`choose_reference`), chosen once and reused by every trial.

        Chosen before the first trial step, so a full fine-tune's frozen copy holds the starting
        weights, as the run's does, and the full-step check measures the memory it takes.
        """
        from tunedeck.engine.preference.reference import choose_reference

        self.require("loaded")
        if self.reference is None:
            self.reference = choose_reference(self.config, self.loaded.model, self.loaded.uses_peft)
        return self.reference

    def _preference_trainer(self, dataset: Any, args: Any, callbacks: list[Any], model: Any = None) -> Any:
        """The run's preference trainer (same builder, same reference) on `dataset`.

        TRL's trainers batch with their own collators (each prompt beside its answers), so a
        trial collator does not apply; the trainers count tokens themselves.
        """
        from transformers.trainer_callback import PrinterCallback

        from tunedeck.engine.preference.trainers import build_preference_trainer

        trainer = build_preference_trainer(
            self.config.task,
            model=self.loaded.model if model is None else model,
            reference=(self.preference_reference() if model is None else self.reference).model,
            args=args,
            train=list(dataset.features),
            validation=None,
            tokenizer=self.tokenizer if model is not None else self.loaded.tokenizer,
            callbacks=callbacks,
            reference_free=self.config.reference_free,
        )
        trainer.remove_callback(PrinterCallback)
        return trainer

    def base_collator(self) -> Any:
        """The collator the run uses."""
        from tunedeck.engine.training.batch_collation import training_collator

        self.require("loaded", "data")
        return training_collator(self.loaded, self.data.packed, self.config)


def trial_config(config: TrainingConfig, **changes: Any) -> TrainingConfig:
    """`config` with `changes` applied, without re-validation (trial schedules combine keys freely)."""
    return config.model_copy(update=changes)


_LABELS = {
    "precision": "precision decision (check 1)",
    "resolved": "pinned base model (check 2)",
    "tokenizer": "tokenizer (check 3)",
    "data": "tokenized training data (check 3)",
    "loaded": "loaded model (check 4)",
}
