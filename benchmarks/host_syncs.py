"""Counting host synchronisations per optimizer step, the same way for any Trainer-based run.

Method. On an accelerator, Python reading a tensor's value (`.item()`, `.tolist()`,
`.cpu()`, `.numpy()`, `bool()`, `int()`, `float()` of a tensor) waits for every queued
kernel: the host stops running ahead. While `HostReadCounter` is installed, those
`torch.Tensor` methods are wrapped to count each call with its Python call site, and
`CallbackHandler.on_step_begin` is wrapped to cut the count into optimizer steps: a step's
window runs from its `on_step_begin` to the next one, so its callbacks and its logging
count for it (and so does fetching the next batch, which is host-side work). `torch.cuda.synchronize` calls are
counted too. Reads made while collating (CPU tensors built before the batch is moved to the
device, never a device sync) are listed apart by call site. What this misses: reads made
in C++ (e.g. data-dependent shapes such as boolean-mask indexing); both sides are built on
the same model code, so those are the same on both sides.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

READ_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")
# Call sites whose tensors are host-side batch bookkeeping (built before the device copy).
HOST_SIDE_SITES = ("data_collator", "training_data.py", "packed_attention.py", "training_speed.py:__call__",
                   "token_counting.py:__call__")


@dataclass
class StepReads:
    """Reads counted during one optimizer step (and its callbacks)."""

    step: int
    device_reads: int
    host_side_reads: int
    synchronize_calls: int


@dataclass
class HostReadCounter:
    """Installs the counting wrappers while used as a context manager."""

    logging_steps: int
    steps: list[StepReads] = field(default_factory=list)
    sites: Counter[str] = field(default_factory=Counter)
    _reads: int = 0
    _host_side: int = 0
    _syncs: int = 0
    _saved: dict[str, Any] = field(default_factory=dict)

    def __enter__(self) -> HostReadCounter:
        import torch
        from transformers.trainer_callback import CallbackHandler

        for name in READ_METHODS:
            original = getattr(torch.Tensor, name)
            self._saved[name] = original
            setattr(torch.Tensor, name, self._wrap_read(original, name))
        self._saved["synchronize"] = torch.cuda.synchronize
        torch.cuda.synchronize = self._wrap_sync(torch.cuda.synchronize)  # type: ignore[assignment]
        self._saved["on_step_begin"] = CallbackHandler.on_step_begin
        counter = self
        original_step_begin = CallbackHandler.on_step_begin

        def on_step_begin(handler: Any, args: Any, state: Any, control: Any) -> Any:
            # Everything since the previous step began belongs to the step that just completed
            # (global_step counts completed steps; 0 is the setup before the first step).
            counter._cut(int(state.global_step))
            return original_step_begin(handler, args, state, control)

        CallbackHandler.on_step_begin = on_step_begin  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import torch
        from transformers.trainer_callback import CallbackHandler

        for name in READ_METHODS:
            setattr(torch.Tensor, name, self._saved[name])
        torch.cuda.synchronize = self._saved["synchronize"]
        CallbackHandler.on_step_begin = self._saved["on_step_begin"]  # type: ignore[method-assign]
        if self.steps:
            self._cut(self.steps[-1].step + 1)  # the last step and the end of training

    def _wrap_read(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        counter = self

        def read(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            site = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"
            counter.sites[f"{site} .{name}"] += 1
            if any(marker in site or marker in frame.f_code.co_filename for marker in HOST_SIDE_SITES):
                counter._host_side += 1
            else:
                counter._reads += 1
            return original(tensor, *args, **kwargs)

        return read

    def _wrap_sync(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def synchronize(*args: Any, **kwargs: Any) -> Any:
            self._syncs += 1
            return original(*args, **kwargs)

        return synchronize

    def _cut(self, step: int) -> None:
        if self.steps and self.steps[-1].step == step:
            return  # several micro-batches (gradient accumulation) begin the same optimizer step
        self.steps.append(StepReads(step, self._reads, self._host_side, self._syncs))
        self._reads = self._host_side = self._syncs = 0

    def summary(self) -> dict[str, Any]:
        """Median device reads on plain steps, the mean on logging steps, the first step, the sites."""
        trained = [s for s in self.steps if s.step > 0]
        plain = [s for s in trained[1:] if s.step % self.logging_steps]
        logging = [s for s in trained[1:] if not s.step % self.logging_steps]
        first = trained[0] if trained else None
        return {
            "steps": len(self.steps),
            "median_device_reads_per_plain_step": statistics.median(s.device_reads for s in plain) if plain else None,
            "mean_device_reads_per_logging_step": (statistics.mean(s.device_reads for s in logging)
                                                   if logging else None),
            "first_step_device_reads": first.device_reads if first else None,
            "median_host_side_reads_per_step": (statistics.median(s.host_side_reads for s in trained)
                                                if trained else None),
            "synchronize_calls_per_step": (statistics.median(s.synchronize_calls for s in trained)
                                           if trained else None),
            "sites": dict(self.sites.most_common(25)),
        }
