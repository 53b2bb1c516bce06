"""Which part of a run each config key changes, and the values an experiment compares (one change at a time).

The experiment method changes one thing per variant. "One thing" is a group of keys
that belong together (a learning rate and its schedule are one optimisation change),
so `KEY_GROUPS` gives every training config key its group, in this one table.
`runtime` keys decide how the run is carried out (checkpoints, devices, kernels,
logging), not what it learns: they are listed but never count as a change.

What is compared is the effective value, not the text written:

- a key left out and its default written out are the same value (both sides are
  filled with the defaults before this module sees them);
- `mixed_precision: auto` is the precision the run resolved to on its machine,
  and `gradient_checkpointing: auto` the true or false its measured step resolved it to,
  when the run recorded them;
- `batch_size` and `gradient_accumulation_steps` are one value, the examples per
  optimizer step: 16 × 1 and 4 × 4 train alike, only the memory split differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RUNTIME_GROUP = "runtime"
# Where a run records what `gradient_checkpointing: auto` resolved to (beside `resolved_precision`).
RESOLVED_CHECKPOINTING_KEY = "resolved_gradient_checkpointing"
# The examples per optimizer step on one process, compared instead of its two factors.
EFFECTIVE_BATCH_KEY = "effective_batch_size"
_BATCH_FACTORS = ("batch_size", "gradient_accumulation_steps")
# Keys naming data by id: a reference that leaves one unset does not fix that data; the variants' data
# itself (version, rows) is compared by the procedure checks instead.
DATA_IDENTITY_KEYS = frozenset({"validation_dataset_id"})

KEY_GROUPS: dict[str, str] = {
    # optimisation: how each step moves the weights
    "learning_rate": "optimisation",
    "lr_scheduler": "optimisation",
    "warmup_ratio": "optimisation",
    "weight_decay": "optimisation",
    "optim": "optimisation",
    "max_grad_norm": "optimisation",
    "polynomial_power": "optimisation",
    EFFECTIVE_BATCH_KEY: "optimisation",
    "batch_size": "optimisation",
    "gradient_accumulation_steps": "optimisation",
    "beta": "optimisation",
    "loss_type": "optimisation",
    "loss_weights": "optimisation",
    "reference_free": "optimisation",
    "desirable_weight": "optimisation",
    "undesirable_weight": "optimisation",
    # data: which rows are trained on and how they become tokens
    "task": "data",
    "validation_dataset_id": "data",
    "max_length": "data",
    "max_prompt_length": "data",
    "packing": "data",
    "truncation": "data",
    "train_on_inputs": "data",
    # model: the starting weights and what is trained of them
    "use_peft": "model",
    "peft_method": "model",
    "lora_r": "model",
    "lora_alpha": "model",
    "lora_dropout": "model",
    "lora_target_modules": "model",
    "init_from_job": "model",
    "init_from_checkpoint": "model",
    "trust_remote_code": "model",
    "mixed_precision": "model",
    # budget: how long it trains and which checkpoint is kept
    "epochs": "budget",
    "early_stopping_patience": "budget",
    "early_stopping_threshold": "budget",
    "load_best_model_at_end": "budget",
    "metric_for_best_model": "budget",
    # evaluation: how the model is measured
    "eval_strategy": "evaluation",
    "eval_steps": "evaluation",
    "eval_max_new_tokens": "evaluation",
    "eval_generation_each_eval": "evaluation",
    "output_schema": "evaluation",
    # seed: data order and initialisation
    "seed": "seed",
    # runtime: how the run is carried out, not what it learns
    "gradient_checkpointing": RUNTIME_GROUP,
    "save_strategy": RUNTIME_GROUP,
    "save_steps": RUNTIME_GROUP,
    "logging_steps": RUNTIME_GROUP,
    "preflight": RUNTIME_GROUP,
    "auto_reduce_batch_on_oom": RUNTIME_GROUP,
    "torch_compile": RUNTIME_GROUP,
    "chunked_cross_entropy": RUNTIME_GROUP,
    "attn_implementation": RUNTIME_GROUP,
    "report_to": RUNTIME_GROUP,
    "devices": RUNTIME_GROUP,
    "processes": RUNTIME_GROUP,
    "machines": RUNTIME_GROUP,
    "strategy": RUNTIME_GROUP,
    "fsdp_cpu_offload": RUNTIME_GROUP,
    "fsdp_reshard_after_forward": RUNTIME_GROUP,
}
OTHER_GROUP = "other"


def key_group(key: str) -> str:
    """The group of a config key (`other` for a key this table does not know)."""
    return KEY_GROUPS.get(key, OTHER_GROUP)


def effective_config(config: Mapping[str, Any], derived: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`config` (defaults filled in) as the run applied it: see the module docstring.

    `derived` is what the run recorded beside its config (`resolved_precision`,
    `resolved_gradient_checkpointing`); without it, `auto` stays `auto`.
    """
    values = dict(config)
    resolved = (derived or {}).get("resolved_precision")
    if values.get("mixed_precision") == "auto" and isinstance(resolved, str):
        values["mixed_precision"] = resolved
    checkpointing = (derived or {}).get(RESOLVED_CHECKPOINTING_KEY)
    if values.get("gradient_checkpointing") == "auto" and isinstance(checkpointing, bool):
        values["gradient_checkpointing"] = checkpointing
    micro, accumulation = (values.get(key) for key in _BATCH_FACTORS)
    if isinstance(micro, int) and isinstance(accumulation, int):
        for key in _BATCH_FACTORS:
            values.pop(key)
        values[EFFECTIVE_BATCH_KEY] = micro * accumulation
    return values


def effective_differences(reference: Mapping[str, Any], variant: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Keys whose effective value differs (reference value, variant value), sorted.

    Both mappings come from `effective_config`. A data identity key counts only where
    the reference names that data.
    """
    keys = sorted(set(reference) | set(variant))
    found = {}
    for key in keys:
        mine, theirs = reference.get(key), variant.get(key)
        if mine == theirs:
            continue
        if key in DATA_IDENTITY_KEYS and mine is None:
            continue
        found[key] = (mine, theirs)
    return found


def changed_groups(differences: Mapping[str, Any]) -> list[str]:
    """The groups the differing keys belong to, in table order; runtime keys do not count as a change."""
    groups = {key_group(key) for key in differences} - {RUNTIME_GROUP}
    order = list(dict.fromkeys([*KEY_GROUPS.values(), OTHER_GROUP]))
    return sorted(groups, key=order.index)
