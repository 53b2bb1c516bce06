"""Choosing how several processes share a run: one process, DDP, FSDP, FSDP with CPU offload.

DDP keeps the whole training state on every device: the weights, the gradients of the
trained ones and the optimizer's state for them. FSDP shards all three across the processes;
CPU offload moves them to host memory between uses. The choice for `strategy: auto` is the
cheapest that fits: DDP when the state fits each device, FSDP when only a shard does, FSDP
with offload when not even a shard does. The projection is of the state alone (activations
come on top and are what the micro-batch fit measures), so a state that takes more than
`STATE_SHARE` of a device counts as not fitting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from tunedeck.config.preference import needs_reference_copy
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue

ResolvedStrategy = Literal["none", "ddp", "fsdp"]

# The training state may take at most this share of a device: the rest is for activations,
# the framework's workspace and fragmentation.
STATE_SHARE = 0.6
_BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "fp16": 2}
# fp32 gradient plus the optimizer's state per trained parameter.
_OPTIMIZER_BYTES = {
    "adamw": 4 + 8,  # gradient, two fp32 moments
    "adamw_8bit": 4 + 2,  # gradient, two 8-bit moments
    "paged_adamw_8bit": 4 + 2,
    "adafactor": 4 + 4,  # gradient, factored second moment (an upper bound for matrices)
}


@dataclass(frozen=True)
class StrategyChoice:
    """The strategy a run uses, whether FSDP offloads to the CPU, the projected state per device, and why."""

    strategy: ResolvedStrategy
    cpu_offload: bool
    world_size: int
    state_bytes: int
    per_device_state_bytes: int
    device_bytes: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded in the preflight report and the run's config)."""
        return asdict(self)


def training_state_bytes(
    config: TrainingConfig, total_parameters: int, trainable_parameters: int, precision: str
) -> int:
    """Bytes of weights, gradients and optimizer state for a model of these parameter counts.

    A preference task whose reference is a frozen copy of the model (full fine-tuning of dpo or
    kto with a reference) holds the weights twice.
    """
    weight = 0.5 if config.peft_method == "qlora" else _BYTES_PER_WEIGHT.get(precision, 4)
    copies = 2 if needs_reference_copy(config) else 1
    return int(copies * total_parameters * weight + trainable_parameters * _OPTIMIZER_BYTES[config.optim])


def choose_strategy(
    config: TrainingConfig,
    world_size: int,
    *,
    state_bytes: int,
    device_bytes: int | None,
    backend: str,
    resuming_shards: bool = False,
) -> StrategyChoice:
    """The strategy for `config` on `world_size` processes whose devices each hold `device_bytes` (None: unknown).

    An explicit `strategy` is kept (and refused where it cannot run: FSDP needs GPUs); `auto`
    picks as the module docstring says. A run resuming a sharded checkpoint (`resuming_shards`)
    stays on FSDP, on any number of processes, one included: only FSDP reads those shards back.
    Raises ConfigError naming the field.
    """
    offload_setting = config.fsdp_cpu_offload
    if resuming_shards:
        if backend not in ("cuda", "rocm"):
            raise ConfigError([Issue(
                f"the checkpoint holds FSDP shards written on GPUs; resume it on GPUs (this run has {backend})",
                field="strategy",
            )])
        offload = bool(offload_setting is True)
        return _choice("fsdp", offload, world_size, state_bytes, device_bytes, "resuming a sharded checkpoint")
    if world_size <= 1:
        return _choice("none", False, 1, state_bytes, device_bytes, "one process")
    budget = int(device_bytes * STATE_SHARE) if device_bytes else None
    strategy = config.strategy
    if strategy == "auto":
        if budget is None or state_bytes <= budget:
            why = "the training state fits each device" if budget else "device memory unknown: replicating"
            return _choice("ddp", False, world_size, state_bytes, device_bytes, why)
        strategy = "fsdp"
    if strategy == "ddp":
        return _choice("ddp", False, world_size, state_bytes, device_bytes, "strategy ddp")
    if backend not in ("cuda", "rocm"):
        raise ConfigError([Issue(
            f"fsdp shards the training state across GPUs; this run has none ({backend}): "
            'use strategy "ddp" (or "auto") on the CPU', field="strategy",
        )])
    shard = state_bytes // world_size
    # "auto" offloads only when a shard alone overflows the budget.
    offload = (budget is not None and shard > budget) if offload_setting == "auto" else bool(offload_setting)
    if config.strategy == "auto":
        why = (f"the training state ({_gib(state_bytes)}) does not fit one device's budget ({_gib(budget or 0)}): "
               "sharding it")
        if offload:
            why += f"; a shard ({_gib(shard)}) does not fit either: offloading to CPU memory"
    else:
        why = "strategy fsdp" + ("; CPU offload" if offload else "")
    return _choice("fsdp", offload, world_size, state_bytes, device_bytes, why)


def _choice(
    strategy: ResolvedStrategy, offload: bool, world_size: int, state_bytes: int, device_bytes: int | None, reason: str
) -> StrategyChoice:
    per_device = 0 if offload else (state_bytes // world_size if strategy == "fsdp" else state_bytes)
    return StrategyChoice(strategy, offload, world_size, state_bytes, per_device, device_bytes, reason)


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"
