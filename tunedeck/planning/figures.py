"""The rates a plan needs, each measured on the machine (a preflight report) or estimated, and saying which.

Measured figures come from the checks before training run on the rented hardware: the
sustained training throughput (check 7), the evaluation procedure's time per row
(check 7, timed on a few validation rows), the checks' own duration, and the checkpoint
cycle (check 6: save, resume, reload in a new model and generate). A figure the report
lacks, or every figure when there is no report or it was measured on other hardware, is
estimated from the model size and the tokens at a stated share of the device's peak
FLOPs: 6 × parameters × tokens for training (forward and backward), 2 × parameters ×
tokens for evaluation (forward only; decoding answers token by token costs more, which
is why a measured figure is worth having). Exports are always estimated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.planning.peak_flops import device_peak

Source = Literal["measured", "estimated"]

DEFAULT_EFFICIENCY = 0.3  # share of peak FLOPs a fine-tuning run sustains (model FLOPs utilisation)
TRAIN_FLOPS_PER_PARAM_TOKEN = 6  # forward (2) and backward (4)
EVAL_FLOPS_PER_PARAM_TOKEN = 2  # forward only
PREFLIGHT_ALLOWANCE_S = 900.0  # the checks load the model twice and run a few dozen steps
BYTES_PER_PARAM = 2  # bf16 weights
DISK_BYTES_PER_S = 1e9  # reading or writing weights
PROCESS_START_S = 120.0  # a new process: imports, model construction, device transfer
EXPORT_FIXED_S = 300.0  # merging an adapter and checksumming the files


@dataclass(frozen=True)
class Machine:
    """What is rented: a device type and how many of them."""

    device_type: str
    device_count: int = 1

    def label(self) -> str:
        """`H100 × 8`."""
        return f"{self.device_type} × {self.device_count}"


@dataclass(frozen=True)
class Figure:
    """One rate or duration of the plan, where it comes from, and how it was obtained."""

    value: float
    unit: str
    source: Source
    basis: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figure:
        """The figure `to_dict` wrote."""
        source: Source = "measured" if data.get("source") == "measured" else "estimated"
        return cls(float(data["value"]), str(data["unit"]), source, str(data.get("basis", "")))


@dataclass(frozen=True)
class Measured:
    """What a preflight report measured on one machine (None: the report lacks that figure)."""

    origin: str  # which report: a work item id, or a job's run record
    device_name: str
    device_count: int
    examples_per_second: float | None
    eval_seconds_per_row: float | None
    preflight_seconds: float | None
    checkpoint_cycle_seconds: float | None


@dataclass(frozen=True)
class PlanFigures:
    """Every rate and duration a timeline is laid out with."""

    train_examples_per_second: Figure
    eval_seconds_per_row: Figure
    preflight_seconds: Figure
    reload_seconds: Figure
    export_seconds: Figure

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-ready form, keyed by figure name."""
        return {name: getattr(self, name).to_dict() for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanFigures:
        """The figures `to_dict` wrote."""
        return cls(**{name: Figure.from_dict(data[name]) for name in cls.__dataclass_fields__})

    def estimated_names(self) -> list[str]:
        """The figures that were not measured on the machine."""
        return [name for name in self.__dataclass_fields__ if getattr(self, name).source == "estimated"]


def _check(name: str, figures: Mapping[str, Any]) -> Mapping[str, Any]:
    for check in figures.get("checks") or ():
        if isinstance(check, Mapping) and check.get("name") == name:
            return check
    return {}


def _positive(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def measured_from_report(report: Mapping[str, Any], origin: str) -> Measured:
    """The figures a preflight report (`PreflightReport.to_dict()`) measured; absent ones are None.

    A check that failed measured nothing trustworthy: its figures are left out.
    """
    hardware = report.get("hardware") if isinstance(report.get("hardware"), Mapping) else {}
    assert isinstance(hardware, Mapping)
    throughput = _check("throughput", report)
    cycle = _check("checkpoint_cycle", report)
    figures = throughput.get("figures") if throughput.get("status") in ("pass", "warn") else None
    figures = figures if isinstance(figures, Mapping) else {}
    evaluation = figures.get("evaluation") if isinstance(figures.get("evaluation"), Mapping) else {}
    assert isinstance(evaluation, Mapping)
    return Measured(
        origin=origin,
        device_name=str(hardware.get("device_name") or hardware.get("backend") or "unknown"),
        device_count=int(hardware.get("device_count") or 1),
        examples_per_second=_positive(figures.get("examples_per_second")),
        eval_seconds_per_row=_positive(evaluation.get("seconds_per_row")),
        preflight_seconds=_positive(report.get("seconds")),
        checkpoint_cycle_seconds=_positive(cycle.get("seconds")) if cycle.get("status") == "pass" else None,
    )


def same_machine(measured: Measured, machine: Machine) -> bool:
    """Whether a report was measured on hardware like `machine` (same device type, same count)."""
    if measured.device_count != machine.device_count:
        return False
    try:
        return device_peak(measured.device_name).key == device_peak(machine.device_type).key
    except ConfigError:
        return measured.device_name.strip().lower() == machine.device_type.strip().lower()


def resolve_figures(
    machine: Machine,
    *,
    measured: Measured | None,
    model_params: float | None,
    tokens_per_row: int,
    efficiency: float = DEFAULT_EFFICIENCY,
) -> PlanFigures:
    """Each figure measured where `measured` (taken on this machine) has it, estimated otherwise.

    Estimating needs `model_params`; ConfigError says so when a figure must be estimated
    without it, and when the device type has no known peak.
    """
    usable = measured if measured is not None and same_machine(measured, machine) else None
    estimate = _Estimator(machine, model_params, tokens_per_row, efficiency)

    def pick(attribute: str, unit: str, what: str, fallback: Callable[[], Figure]) -> Figure:
        value = getattr(usable, attribute) if usable is not None else None
        if usable is not None and value is not None:
            return Figure(float(value), unit, "measured", f"{what}, preflight {usable.origin} on {machine.label()}")
        return fallback()

    return PlanFigures(
        train_examples_per_second=pick(
            "examples_per_second", "rows/s", "sustained training throughput (check 7)", estimate.train_rate
        ),
        eval_seconds_per_row=pick(
            "eval_seconds_per_row", "s/row", "the evaluation procedure timed on a few rows (check 7)",
            estimate.eval_cost,
        ),
        preflight_seconds=pick("preflight_seconds", "s", "the checks' own duration", estimate.preflight),
        reload_seconds=pick(
            "checkpoint_cycle_seconds", "s", "save, resume and reload a checkpoint (check 6)", estimate.reload
        ),
        export_seconds=estimate.export(),
    )  # fmt: skip


@dataclass(frozen=True)
class _Estimator:
    """Figures from the model size, the tokens and the device's peak FLOPs."""

    machine: Machine
    model_params: float | None
    tokens_per_row: int
    efficiency: float

    def _params(self) -> float:
        if self.model_params is None or self.model_params <= 0:
            raise ConfigError(
                [
                    Issue(
                        "a figure must be estimated (no preflight report measured it on this machine) "
                        "and estimating needs the model's size",
                        field="model_params",
                        expected="the number of parameters of the base model, e.g. 7e9",
                    )
                ],
                title="cannot plan the rental",
            )
        return self.model_params

    def _flops(self) -> tuple[float, str]:
        peak = device_peak(self.machine.device_type)
        sustained = peak.flops * self.machine.device_count * self.efficiency
        basis = (
            f"{self.efficiency:.0%} of {peak.tflops:g} TFLOPS × {self.machine.device_count} ({peak.key}: {peak.source})"
        )
        return sustained, basis

    def train_rate(self) -> Figure:
        params = self._params()
        flops, basis = self._flops()
        per_row = TRAIN_FLOPS_PER_PARAM_TOKEN * params * self.tokens_per_row
        return Figure(
            flops / per_row,
            "rows/s",
            "estimated",
            f"6 × {params:.3g} parameters × {self.tokens_per_row} tokens a row, at {basis}",
        )

    def eval_cost(self) -> Figure:
        params = self._params()
        flops, basis = self._flops()
        per_row = EVAL_FLOPS_PER_PARAM_TOKEN * params * self.tokens_per_row
        return Figure(
            per_row / flops,
            "s/row",
            "estimated",
            f"2 × {params:.3g} parameters × {self.tokens_per_row} tokens a row, at {basis}; "
            "decoding answers costs more",
        )

    def preflight(self) -> Figure:
        return Figure(PREFLIGHT_ALLOWANCE_S, "s", "estimated", "a fixed allowance for the checks before training")

    def weights_seconds(self) -> float:
        return BYTES_PER_PARAM * self._params() / DISK_BYTES_PER_S

    def reload(self) -> Figure:
        return Figure(
            PROCESS_START_S + self.weights_seconds(),
            "s",
            "estimated",
            f"{PROCESS_START_S:g} s to start a process, plus the weights ({BYTES_PER_PARAM} bytes a parameter) "
            f"read at {DISK_BYTES_PER_S / 1e9:g} GB/s",
        )

    def export(self) -> Figure:
        if self.model_params is None:
            return Figure(EXPORT_FIXED_S, "s", "estimated", f"a fixed {EXPORT_FIXED_S:g} s (model size not given)")
        return Figure(
            EXPORT_FIXED_S + 2 * self.weights_seconds(),
            "s",
            "estimated",
            f"{EXPORT_FIXED_S:g} s plus the weights read and written at {DISK_BYTES_PER_S / 1e9:g} GB/s",
        )
