"""The preference-tuning keys: which task each applies to, and which settings they cannot go with.

The tasks `dpo`, `orpo` and `kto` train on preferred and dispreferred answers. Their keys
(`beta`, `loss_type`, ...) mean nothing to the other tasks, so a config that sets one for a
task it does not apply to is refused rather than silently ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from tunedeck.config.training import TrainingConfig

PREFERENCE_TASKS: Final[tuple[str, ...]] = ("dpo", "orpo", "kto")
"""Tasks trained on preference data."""

REFERENCE_TASKS: Final[tuple[str, ...]] = ("dpo", "kto")
"""Preference tasks whose loss compares the model with a frozen reference (orpo needs none)."""

KEY_TASKS: Final[dict[str, tuple[str, ...]]] = {
    "beta": PREFERENCE_TASKS,
    "max_prompt_length": PREFERENCE_TASKS,
    "loss_type": ("dpo", "kto"),
    "loss_weights": ("dpo",),
    "reference_free": ("dpo",),
    "desirable_weight": ("kto",),
    "undesirable_weight": ("kto",),
}
"""Each preference key and the tasks it applies to (the dashboard shows a key only for these)."""

DPO_LOSS_TYPES: Final[frozenset[str]] = frozenset(
    {
        "sigmoid",
        "hinge",
        "ipo",
        "exo_pair",
        "nca_pair",
        "robust",
        "bco_pair",
        "sppo_hard",
        "aot",
        "aot_unpaired",
        "apo_zero",
        "apo_down",
        "discopop",
        "sft",
        "sigmoid_norm",
    }
)
KTO_LOSS_TYPES: Final[frozenset[str]] = frozenset({"kto", "apo_zero_unpaired"})

PREFERENCE_PADDING: Final[str] = (
    "preference batches hold each prompt with both of its answers side by side, padded: the preference "
    "trainers have no padding-free batches"
)
PACKING_REFUSAL: Final[str] = (
    "packing applies to sft only: preference batches hold each prompt with both of its answers side by side, "
    "and padding-free preference batches are not available in the preference trainers; "
    'set packing: "auto" or false'
)


def is_preference_task(task: str) -> bool:
    """Whether `task` trains on preference data (dpo, orpo, kto)."""
    return task in PREFERENCE_TASKS


def needs_reference_copy(config: TrainingConfig) -> bool:
    """Whether the run keeps a frozen copy of the whole model as its reference.

    dpo and kto compare the model with where it started. With an adapter that start is the
    model with a frozen copy of the starting adapter (adapter-sized); a full fine-tune changes every weight, so the
    starting weights are kept beside it, unless dpo is reference-free.
    """
    if config.task not in REFERENCE_TASKS or config.use_peft:
        return False
    return not (config.task == "dpo" and config.reference_free)


def smallest_micro_batch(config: TrainingConfig) -> int:
    """The smallest micro-batch `config` can train with: 2 for kto's KL term, else 1.

    kto estimates its KL term by pairing each prompt with another completion of the same
    micro-batch (its "apo_zero_unpaired" loss has no KL term). The memory fit and the
    out-of-memory retry never go below this.
    """
    if config.task == "kto" and not (config.user_set("loss_type") and config.loss_type != "kto"):
        return 2
    return 1


def loss_types(config: TrainingConfig) -> list[str]:
    """`loss_type` as a list (a single value is a list of one)."""
    value = config.loss_type
    return list(value) if isinstance(value, list) else [value]


def preference_problems(config: TrainingConfig) -> list[tuple[str, str]]:
    """Each preference key `config` sets that does not fit its task, as (field, message)."""
    problems: list[tuple[str, str]] = []
    task = config.task
    for key, tasks in KEY_TASKS.items():
        if task not in tasks and config.user_set(key):
            problems.append((key, f"{key} applies to task {' or '.join(tasks)} only, not to task {task}"))
    if task == "dpo":
        problems += _dpo_problems(config)
    elif task == "kto" and config.user_set("loss_type"):
        wrong = [kind for kind in loss_types(config) if kind not in KTO_LOSS_TYPES]
        if wrong or isinstance(config.loss_type, list):
            found = wrong or config.loss_type
            problems.append(("loss_type", f'kto takes one loss_type, "kto" or "apo_zero_unpaired" (found {found})'))
    if config.batch_size < smallest_micro_batch(config):
        problems.append(
            (
                "batch_size",
                "kto estimates its KL term by pairing each prompt with another completion of the same micro-batch: "
                "batch_size must be at least 2",
            )
        )
    if is_preference_task(task):
        if config.packing is True:
            problems.append(("packing", PACKING_REFUSAL))
        if config.chunked_cross_entropy is True:
            problems.append(
                (
                    "chunked_cross_entropy",
                    "chunked_cross_entropy applies to the sft loss only: preference trainers compute their own "
                    'log-probabilities; set it to "auto" or false',
                )
            )
        if config.max_prompt_length is not None and config.max_prompt_length >= config.max_length:
            problems.append(
                (
                    "max_prompt_length",
                    f"max_prompt_length ({config.max_prompt_length}) must be less than "
                    f"max_length ({config.max_length}) "
                    "to leave room for the answers",
                )
            )
    if config.init_from_checkpoint is not None and config.init_from_job is None:
        problems.append(
            ("init_from_checkpoint", "init_from_checkpoint needs init_from_job (the job the step belongs to)")
        )
    return problems


def _dpo_problems(config: TrainingConfig) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    kinds = loss_types(config)
    wrong = [kind for kind in kinds if kind not in DPO_LOSS_TYPES]
    if wrong:
        expected = f"one or a list of {sorted(DPO_LOSS_TYPES)}"
        problems.append(("loss_type", f"not a dpo loss_type: {wrong} (expected {expected})"))
    if not kinds:
        problems.append(("loss_type", "loss_type is an empty list: name at least one dpo loss"))
    if config.loss_weights is not None and len(config.loss_weights) != len(kinds):
        problems.append(
            (
                "loss_weights",
                f"loss_weights needs one weight per loss_type ({len(kinds)}), found {len(config.loss_weights)}",
            )
        )
    return problems
