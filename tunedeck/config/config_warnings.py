"""Warnings about a valid config: choices that run, but probably not as the user meant.

A warning never refuses a config (that is what contradictions in `TrainingConfig` are
for); it is shown by `tunedeck config validate` and can be returned by the API beside
the resolved config.
"""

from __future__ import annotations

from tunedeck.config.derived import DerivedValues, derive_values, schedule_refusals, steps_at_zero_rate
from tunedeck.config.distribution import placement
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import Issue

# Below this many optimizer steps a run barely moves from its starting point, and a learning-rate
# schedule (warmup, then decay) has no room to do what it is for.
FEW_STEPS = 10


def config_warnings(
    config: TrainingConfig, source: str | None = None, *, train_examples: int | None = None
) -> list[Issue]:
    """Every warning for `config`, each naming its field and the alternative.

    With `train_examples` (the training set's row count) the schedule is checked too.
    """
    warnings: list[Issue] = []
    if train_examples is not None and train_examples > 0:
        where = placement(config)
        derived = derive_values(config, train_examples, where.processes * where.machines)
        warnings += schedule_refusals(config, derived, source) + schedule_warnings(config, derived, source)
    if config.lr_scheduler == "constant" and config.warmup_ratio > 0 and config.user_set("warmup_ratio"):
        # The job config keys say every scheduler supports warmup, but also that "constant" is a fixed
        # rate for the whole run; tunedeck keeps "constant" constant and says so here.
        warnings.append(
            Issue(
                f'warmup_ratio {config.warmup_ratio} is ignored with lr_scheduler "constant" '
                "(a fixed learning rate from the first step)",
                field="warmup_ratio",
                file=source,
                expected='lr_scheduler "constant_with_warmup" for a warmup then a constant rate, or warmup_ratio 0',
            )
        )
    return warnings


def schedule_warnings(config: TrainingConfig, derived: DerivedValues, source: str | None = None) -> list[Issue]:
    """Warnings about a run's step count: most of it warmup, or too few optimizer steps to learn much.

    A schedule that would not train at all is `schedule_refusals`' to report (the checks before training
    refuse it); these warnings are about runs that train, but little.
    """
    warnings: list[Issue] = []
    total, warmup = derived.total_steps, derived.warmup_steps
    more_steps = (
        f"more epochs (now {config.epochs}), more data, or a smaller effective batch "
        f"(now {derived.effective_batch_size})"
    )
    if warmup and 2 * warmup >= total > steps_at_zero_rate(derived):
        # The trainer's warmup starts at a learning rate of 0: a short run spends much of itself below its rate.
        warnings.append(Issue(
            f"{warmup} of the {total} step(s) are warmup: the learning rate reaches {config.learning_rate:g} "
            "only in the second half of the run, and the first step trains at 0",
            field="warmup_ratio", file=source,
            expected=f"a lower warmup_ratio (now {config.warmup_ratio:g}), or {more_steps}",
        ))
    if total < FEW_STEPS:
        warnings.append(Issue(
            f"only {total} optimizer step(s): too few for the model to learn much, or for the loss curve to say "
            "anything",
            field="epochs", file=source,
            expected=f"at least {FEW_STEPS} steps: {more_steps}",
        ))
    return warnings
