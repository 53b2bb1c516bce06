"""Which process of a multi-process run this is, and the process group they share.

A run on several processes is started by `torchrun` (one machine) or by Ray Train (several
machines); both describe the process through the environment variables `RANK`,
`LOCAL_RANK`, `WORLD_SIZE` and `LOCAL_WORLD_SIZE`. A run started any other way is one
process: rank 0 of 1. Ray Train initialises the process group before the engine runs; under
`torchrun` the engine does, so `init_process_group` joins an existing group or makes one.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

T = TypeVar("T")

# Collectives wait this long for a lost peer before failing: long enough for rank 0 to write a
# large checkpoint while the others wait at the barrier after it, short enough that a dead rank
# does not hold the devices of the others for hours.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)
# How long the processes of a finished run wait for each other, and for the group's teardown, at the end.
TEARDOWN_TIMEOUT = timedelta(minutes=2)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run: global rank, rank on its machine, and the counts."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes events, results and the run directory."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether the run has more than one process."""
        return self.world_size > 1

    @property
    def machines(self) -> int:
        """Machines the run spans (processes per machine are equal)."""
        return max(1, self.world_size // max(1, self.local_world_size))

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form."""
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "local_world_size": self.local_world_size,
        }


def current_ranks(environ: Mapping[str, str] | None = None) -> Ranks:
    """This process's ranks from the launcher's environment; rank 0 of 1 when no launcher set them."""
    env = os.environ if environ is None else environ
    world_size = int(env.get("WORLD_SIZE") or 1)
    return Ranks(
        rank=int(env.get("RANK") or 0),
        local_rank=int(env.get("LOCAL_RANK") or 0),
        world_size=world_size,
        local_world_size=int(env.get("LOCAL_WORLD_SIZE") or world_size),
    )


def backend_for(device_type: str) -> str:
    """The collective backend for the run's devices: NCCL on CUDA (RCCL behind it on ROCm), gloo on the CPU."""
    return "nccl" if device_type == "cuda" else "gloo"


def init_process_group(ranks: Ranks, device_type: str) -> None:
    """Join the run's process group (made here under torchrun, already made under Ray Train); one process: nothing."""
    if not ranks.distributed:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if device_type == "cuda":
        import torch

        torch.cuda.set_device(ranks.local_rank)
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if not restart:
        dist.init_process_group(backend=backend_for(device_type), timeout=COLLECTIVE_TIMEOUT)
        return
    # Under torchrun the store outlives a restart of the ranks, and the addresses the ranks before
    # published are still in it: a restarted rank would read a dead peer's and time out connecting.
    # A namespace per restart gives each group of ranks its own keys.
    store, rank, world_size = next(dist.rendezvous("env://", timeout=COLLECTIVE_TIMEOUT))
    dist.init_process_group(
        backend=backend_for(device_type),
        store=dist.PrefixStore(f"tunedeck-restart-{restart}/", store),
        rank=rank,
        world_size=world_size,
        timeout=COLLECTIVE_TIMEOUT,
    )


def barrier(ranks: Ranks) -> None:
    """Wait until every process reaches this point (nothing to wait for on one process)."""
    if ranks.distributed:
        import torch.distributed as dist

        dist.barrier()


def broadcast_from_main(ranks: Ranks, value: T | None) -> T:
    """Rank 0's `value` on every process (a JSON-like object: a spec, a report, a decision)."""
    if not ranks.distributed:
        assert value is not None, "rank 0 must give the value it broadcasts"
        return value
    import torch.distributed as dist

    box: list[Any] = [value if ranks.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[no-any-return]


def destroy_process_group(ranks: Ranks) -> None:
    """Leave the process group once every process is done with it, so the launcher sees a clean exit.

    Every process meets at a barrier first: a process that tore its side down while a peer was
    still in a collective (or still tearing down) left that peer blocked in the teardown. The
    barrier and the teardown are both bounded, so a lost peer cannot keep this process alive.
    """
    if not ranks.distributed:
        return
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    try:
        _barrier_within(TEARDOWN_TIMEOUT)
    except Exception as error:  # a peer is gone: tearing the group down would wait for it
        print(f"leaving the process group without a teardown: {error}", file=sys.stderr, flush=True)
        return
    teardown = threading.Thread(target=dist.destroy_process_group, name="process-group-teardown", daemon=True)
    teardown.start()
    teardown.join(TEARDOWN_TIMEOUT.total_seconds())
    if teardown.is_alive():
        print("the process group teardown did not finish; leaving it behind", file=sys.stderr, flush=True)


def _barrier_within(timeout: timedelta) -> None:
    """Wait for every process of the group, at most `timeout` (gloo names a missing rank)."""
    import torch.distributed as dist

    if dist.get_backend() == "gloo":
        dist.monitored_barrier(timeout=timeout)
    else:
        dist.barrier()


def max_across_ranks(ranks: Ranks, value: int, device_type: str) -> int:
    """The largest of every process's `value`: how the processes agree on one decision at the same step."""
    if not ranks.distributed:
        return value
    import torch
    import torch.distributed as dist

    # NCCL reduces device tensors only; gloo reduces host tensors.
    device = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")
    box = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(box, op=dist.ReduceOp.MAX)
    return int(box.item())


def device_type_of(backend: str) -> str:
    """The torch device type processes of a run on `backend` share collectives on ("cuda" for ROCm too)."""
    return "cuda" if backend in ("cuda", "rocm") else "cpu"


def gather_from_all(ranks: Ranks, value: T) -> list[T]:
    """Every process's `value`, in rank order, on every process (a JSON-like object)."""
    if not ranks.distributed:
        return [value]
    import torch.distributed as dist

    gathered: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(gathered, value)
    return gathered


def rank_placement(ranks: Ranks, device_type: str) -> dict[str, Any]:
    """Where this process runs: host, rank, and the device it trains on (with the id the machine knows it by)."""
    import socket

    visible = [item for item in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if item]
    device = f"cuda:{ranks.local_rank}" if device_type == "cuda" else "cpu"
    physical = visible[ranks.local_rank] if device_type == "cuda" and ranks.local_rank < len(visible) else None
    return {**ranks.to_dict(), "host": socket.gethostname(), "device": device, "device_id": physical}


_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK")


@contextmanager
def alone() -> Iterator[None]:
    """Run the body as a one-process program, then let the run's own distributed setup start afresh.

    The checks before training build trainers of their own; seeing a launcher's rank variables
    they would wait for the other processes, which are not running them. The variables are
    hidden for the duration, and the accelerator state those trainers cached is dropped after.
    """
    saved = {name: os.environ.pop(name) for name in _RANK_VARIABLES if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
