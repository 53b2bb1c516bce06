"""What every benchmark shares: alternating repetitions, medians, machine facts, JSON, a plot, a table.

A benchmark builds a `BenchmarkResult` from `Comparison`s (tunedeck against a baseline run
side by side, reported as the median of per-repetition ratios) and `Measurement`s (one
figure against an absolute target, e.g. a latency), adds the checks it ran (exactness,
counts), and calls `write_result`. Repetitions alternate which side runs first, so a slow
drift of the machine (other processes, thermal state) loads both sides alike; the load
average before and after is recorded because the ratios are only as good as the machine
was quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_PACKAGES = ("torch", "transformers", "peft", "accelerate", "tokenizers", "numpy")


@dataclass
class Comparison:
    """Tunedeck against a baseline on one metric; `ratio` is always candidate / baseline."""

    key: str
    title: str
    unit: str
    baseline_label: str
    candidate_label: str
    higher_is_better: bool
    target_ratio: float | None = None
    baseline_values: list[float] = field(default_factory=list)
    candidate_values: list[float] = field(default_factory=list)
    first: list[str] = field(default_factory=list)  # which side ran first in each repetition

    def ratios(self) -> list[float]:
        """Per-repetition candidate / baseline."""
        return [c / b if b else float("inf") for b, c in zip(self.baseline_values, self.candidate_values, strict=True)]

    def median_ratio(self) -> float | None:
        """Median of the per-repetition ratios (robust to one disturbed repetition)."""
        ratios = self.ratios()
        return statistics.median(ratios) if ratios else None

    def met(self) -> bool | None:
        """Whether the median ratio reaches the target (None without a target)."""
        ratio = self.median_ratio()
        if self.target_ratio is None or ratio is None:
            return None
        return ratio >= self.target_ratio if self.higher_is_better else ratio <= self.target_ratio

    def target_text(self) -> str:
        """The target as a reader states it: `≥ 1.8×` or `≤ 0.2×`."""
        if self.target_ratio is None:
            return "—"
        return f"{'≥' if self.higher_is_better else '≤'} {self.target_ratio:g}×"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with every repetition."""
        ratio = self.median_ratio()
        return {
            "key": self.key,
            "title": self.title,
            "unit": self.unit,
            "baseline": self.baseline_label,
            "candidate": self.candidate_label,
            "higher_is_better": self.higher_is_better,
            "repetitions": [
                {"baseline": b, "candidate": c, "ratio": r, "first": f}
                for b, c, r, f in zip(self.baseline_values, self.candidate_values, self.ratios(), self.first,
                                      strict=True)
            ],
            "median_baseline": statistics.median(self.baseline_values) if self.baseline_values else None,
            "median_candidate": statistics.median(self.candidate_values) if self.candidate_values else None,
            "median_ratio": ratio,
            "target": self.target_text(),
            "target_ratio": self.target_ratio,
            "met": self.met(),
        }


@dataclass
class Measurement:
    """One figure against an absolute target (e.g. a p50 latency under 1 s)."""

    key: str
    title: str
    unit: str
    higher_is_better: bool
    target: float | None = None
    values: list[float] = field(default_factory=list)

    def median(self) -> float | None:
        """Median over repetitions."""
        return statistics.median(self.values) if self.values else None

    def met(self) -> bool | None:
        """Whether the median reaches the target (None without a target)."""
        value = self.median()
        if self.target is None or value is None:
            return None
        return value >= self.target if self.higher_is_better else value <= self.target

    def target_text(self) -> str:
        """The target as a reader states it."""
        if self.target is None:
            return "—"
        return f"{'≥' if self.higher_is_better else '<'} {self.target:g} {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with every repetition."""
        return {
            "key": self.key,
            "title": self.title,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "values": self.values,
            "median": self.median(),
            "target": self.target_text(),
            "target_value": self.target,
            "met": self.met(),
        }


@dataclass
class BenchmarkResult:
    """Everything one benchmark measured, plus the facts needed to trust (or distrust) it."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)  # correctness checks run alongside (exactness, counts)
    notes: list[str] = field(default_factory=list)
    packages: tuple[str, ...] = DEFAULT_PACKAGES
    started: float = field(default_factory=time.time)
    load_before: tuple[float, float, float] = field(default_factory=lambda: load_average())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `write_result` stores)."""
        return {
            "benchmark": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "measurements": [m.to_dict() for m in self.measurements],
            "checks": self.checks,
            "notes": self.notes,
            "machine": machine_info(),
            "load_average": {"before": list(self.load_before), "after": list(load_average())},
            "versions": package_versions(self.packages),
            "started_unix": round(self.started, 3),
            "seconds": round(time.time() - self.started, 2),
        }


def run_alternating(
    comparison: Comparison,
    baseline: Callable[[], float],
    candidate: Callable[[], float],
    repeats: int,
    *,
    warmup: bool = True,
    on_repetition: Callable[[int, float, float], None] | None = None,
) -> Comparison:
    """Run both sides `repeats` times, swapping which goes first each time; values go into `comparison`.

    Each callable runs one repetition and returns its figure (a rate or a duration). With
    `warmup`, each side runs once unrecorded first, so imports and allocator growth are not
    charged to whichever side happens to go first.
    """
    if warmup:
        baseline()
        candidate()
    for index in range(repeats):
        order = ("baseline", "candidate") if index % 2 == 0 else ("candidate", "baseline")
        figures: dict[str, float] = {}
        for side in order:
            figures[side] = baseline() if side == "baseline" else candidate()
        comparison.baseline_values.append(figures["baseline"])
        comparison.candidate_values.append(figures["candidate"])
        comparison.first.append(order[0])
        if on_repetition is not None:
            on_repetition(index, figures["baseline"], figures["candidate"])
    return comparison


def timed(action: Callable[[], Any]) -> float:
    """Seconds `action` takes (perf_counter)."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def percentile(values: Iterable[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty collection."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def load_average() -> tuple[float, float, float]:
    """1, 5 and 15 minute load averages (zeros where the platform has none)."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return (0.0, 0.0, 0.0)
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or _cpu_model(),
    }
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed versions of `names` ("absent" when not installed)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def write_result(result: BenchmarkResult, results_dir: Path | None = None, *, plot: bool = True) -> Path:
    """Write `<name>.json` (atomically) and `<name>.png`, print the table; returns the JSON path."""
    folder = Path(results_dir) if results_dir is not None else RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.name}.json"
    staging = path.with_suffix(".json.tmp")
    staging.write_text(json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(staging, path)
    if plot:
        plot_result(result, folder / f"{result.name}.png")
    print(format_table(result))
    print(f"wrote {path}")
    return path


def format_table(result: BenchmarkResult) -> str:
    """A plain-text table of the result's comparisons and measurements."""
    lines = [f"== {result.name} (load average {result.load_before[0]:.2f} → {load_average()[0]:.2f}) =="]
    for comparison in result.comparisons:
        ratio = comparison.median_ratio()
        lines.append(
            f"{comparison.title}: {comparison.candidate_label} vs {comparison.baseline_label}: "
            f"median {ratio:.3g}× (target {comparison.target_text()}, {_verdict(comparison.met())}); "
            f"per repetition {', '.join(f'{r:.3g}' for r in comparison.ratios())}"
        )
    for measurement in result.measurements:
        value = measurement.median()
        lines.append(
            f"{measurement.title}: median {value:.4g} {measurement.unit} "
            f"(target {measurement.target_text()}, {_verdict(measurement.met())})"
        )
    for name, value in result.checks.items():
        lines.append(f"check {name}: {value}")
    return "\n".join(lines)


def _verdict(met: bool | None) -> str:
    return "no target" if met is None else ("met" if met else "NOT met")


def plot_result(result: BenchmarkResult, path: Path) -> None:
    """One panel per comparison (both sides per repetition) and per measurement."""
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede pyplot
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = len(result.comparisons) + len(result.measurements)
    if panels == 0:
        return
    figure, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.6), squeeze=False)
    for axis, comparison in zip(axes[0], result.comparisons, strict=False):
        runs = range(1, len(comparison.baseline_values) + 1)
        axis.plot(runs, comparison.baseline_values, "o-", label=comparison.baseline_label)
        axis.plot(runs, comparison.candidate_values, "s-", label=comparison.candidate_label)
        ratio = comparison.median_ratio()
        axis.set_title(f"{comparison.title}\nmedian ratio {ratio:.3g}× (target {comparison.target_text()})",
                       fontsize=9)
        axis.set_xlabel("repetition")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_ylabel(comparison.unit)
        axis.legend(fontsize=7)
    for axis, measurement in zip(axes[0][len(result.comparisons):], result.measurements, strict=False):
        axis.plot(range(1, len(measurement.values) + 1), measurement.values, "o-")
        if measurement.target is not None:
            axis.axhline(measurement.target, color="red", linestyle="--", label="target")
            axis.legend(fontsize=7)
        axis.set_title(f"{measurement.title}\nmedian {measurement.median():.4g} {measurement.unit}", fontsize=9)
        axis.set_xlabel("repetition")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_ylabel(measurement.unit)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


T = TypeVar("T")
POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def scratch_postgres(explicit: str | None) -> tuple[str, Callable[[], None]]:
    """A PostgreSQL URL and its cleanup: `explicit` as given, else a fresh database on the local server.

    The fresh one is created on 127.0.0.1:5432 (user `postgres`, trust auth) and dropped by the
    cleanup, so benchmarks never touch a database someone uses. Raises when no server answers.
    """
    if explicit:
        return explicit, lambda: None
    import psycopg

    admin = psycopg.connect(POSTGRES_ADMIN, autocommit=True, connect_timeout=3)
    name = f"tunedeck_bench_{os.getpid()}_{secrets.token_hex(3)}"
    admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()

    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", drop


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """`--postgres URL` (use that database) and `--no-postgres` (SQLite only) for benchmarks on both databases."""
    parser.add_argument("--postgres", default=None, help="use this database instead of creating one")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")


def on_postgres(args: argparse.Namespace, result: BenchmarkResult, run: Callable[[str], T]) -> T | None:
    """`run(url)` on the PostgreSQL database the arguments name (a scratch one by default), then clean up.

    Without a server, or with `--no-postgres`, nothing runs and the result's notes say why.
    """
    if args.no_postgres:
        result.notes.append("PostgreSQL skipped: --no-postgres")
        return None
    try:
        url, cleanup = scratch_postgres(args.postgres)
    except Exception as error:  # no server here: SQLite alone, and say so
        result.notes.append(f"PostgreSQL skipped: {type(error).__name__}: {error}")
        return None
    try:
        return run(url)
    finally:
        cleanup()
