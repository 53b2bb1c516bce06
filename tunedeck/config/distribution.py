"""Where a job's processes run: devices reserved per machine, processes per machine, machines.

The job config keys `devices`, `processes` and `machines` say it; this module turns them
into the numbers the queue and the worker act on, so the rule lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.config.training import TrainingConfig


@dataclass(frozen=True)
class Placement:
    """A job's processes and devices on each machine it spans.

    `devices` is the count the worker reserves (0 when the job reserves none); `hide_devices`
    is true when the job asked for the CPU only, so it must see no accelerator at all (a job
    with `devices: "auto"` reserves none and keeps the worker's view, as a job always did).
    """

    devices: int
    processes: int
    machines: int
    hide_devices: bool

    @property
    def world_size(self) -> int:
        """Processes in all: one rank each."""
        return self.processes * self.machines

    @property
    def devices_needed(self) -> int:
        """Accelerators the queue must find free on one worker before the job may start there."""
        return self.devices


def placement(config: TrainingConfig) -> Placement:
    """The placement the job config asks for."""
    devices = 0 if config.devices == "auto" else config.devices
    # "auto": one process per reserved device; one on the CPU.
    processes = config.processes if config.processes != "auto" else max(1, devices)
    return Placement(devices=devices, processes=processes, machines=config.machines, hide_devices=config.devices == 0)
