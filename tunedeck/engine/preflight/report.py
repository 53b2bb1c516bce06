"""The preflight report: the checks, each pass, warn or fail with its figures (skip when it could not run).

`run_preflight` runs checks 1–8, 10 and 11 in one process; check 9 (the interconnect) needs every
process of a multi-process run, so the launcher runs it on all ranks and appends its
result with `PreflightReport.add_check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "warn", "fail", "skip"]

CHECK_TITLES: dict[int, tuple[str, str]] = {
    1: ("stack", "driver, runtime, framework and accelerator support the chosen options"),
    2: ("checkpoint_and_disk", "base model revision pinned; free disk for weights and checkpoints"),
    3: ("tokenization", "tokenization and loss mask on a few formatted examples"),
    4: ("full_step", "one full step at the configured max_length and micro-batch; memory peaks"),
    5: ("overfit", "overfit a tiny sample: the loss must fall"),
    6: ("checkpoint_cycle", "save, resume, reload and generate from a checkpoint"),
    7: ("throughput", "sustained throughput; GPU temperature, clocks, power and throttling"),
    8: ("margins", "projected duration and disk for checkpoints, logs and evaluation"),
    9: ("interconnect", "all-reduce bandwidth and latency between the run's processes"),
    10: ("accumulation", "accumulated micro-batches give the gradients of one batch of the same examples"),
    11: ("activation_checkpointing", "activation checkpointing gives the gradients of the step without it"),
}

# Checks that apply to some runs only (the interconnect needs several processes, the checkpointing
# check a run that checkpoints): their skip means "nothing to check here", not "an earlier check
# failed", so it fails nothing (an earlier failure blocks the run by itself).
CHECKS_THAT_MAY_NOT_APPLY: frozenset[int] = frozenset({9, 10, 11})


@dataclass
class CheckResult:
    """The outcome of one check."""

    number: int
    status: Status
    message: str
    figures: dict[str, Any] = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def name(self) -> str:
        """Short name of the check (stack, full_step, ...)."""
        return CHECK_TITLES[self.number][0]

    @property
    def blocks(self) -> bool:
        """Whether this result stops the run: a failure, or a skip because an earlier check failed."""
        if self.status == "skip":
            return self.number not in CHECKS_THAT_MAY_NOT_APPLY
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "number": self.number,
            "name": self.name,
            "title": CHECK_TITLES[self.number][1],
            "status": self.status,
            "message": self.message,
            "figures": self.figures,
            "advice": self.advice,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class PreflightReport:
    """All checks in order, the memory-fit decision, and what they ran on."""

    checks: list[CheckResult]
    hardware: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    memory_fit: dict[str, Any] | None = None
    # gradient_checkpointing as the full-step check resolved it (CheckpointingChoice.to_dict()); None when not run
    gradient_checkpointing: dict[str, Any] | None = None
    seconds: float = 0.0
    reason: str | None = None  # why a resumed run was checked again ("platform changed: ..."); None for a new run

    @property
    def ok(self) -> bool:
        """No check failed (a skipped check means an earlier one failed, unless the check does not apply)."""
        return not any(check.blocks for check in self.checks)

    @property
    def status(self) -> Status:
        """fail when any check failed or was skipped for that, warn when any warned, else pass."""
        if not self.ok:
            return "fail"
        return "warn" if any(check.status == "warn" for check in self.checks) else "pass"

    def add_check(self, result: CheckResult) -> None:
        """Add a check run outside `run_preflight` (the interconnect, on every rank); it counts in `ok` and `status`.

        A result with the same number replaces the earlier one; the checks stay in number
        order and the report's time includes the new check's.
        """
        self.checks = sorted(
            [check for check in self.checks if check.number != result.number] + [result],
            key=lambda check: check.number,
        )
        self.seconds += result.seconds

    def check(self, name_or_number: str | int) -> CheckResult:
        """One check by name or number."""
        for check in self.checks:
            if name_or_number in (check.number, check.name):
                return check
        raise KeyError(name_or_number)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `tunedeck preflight --json` prints and the run stores)."""
        return {
            "status": self.status,
            "ok": self.ok,
            "checks": [check.to_dict() for check in self.checks],
            "memory_fit": self.memory_fit,
            "gradient_checkpointing": self.gradient_checkpointing,
            "hardware": self.hardware,
            "model": self.model,
            "seconds": round(self.seconds, 3),
            "reason": self.reason,
        }
