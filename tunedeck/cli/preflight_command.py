"""`tunedeck preflight`: the checks before a long training, as a table or JSON; exit 1 when one fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors

console = Console()

_STYLES = {"pass": "green", "warn": "yellow", "fail": "red", "skip": "grey50"}


def parse_bytes(text: str) -> int:
    """`12GiB`, `512M` or a plain byte count, as bytes (binary units); a bad value is a usage error."""
    from tunedeck.engine.preflight.memory_cap import parse_size

    try:
        return parse_size(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def preflight(
    config: Path = typer.Option(..., "--config", help="JSON training config (the job config keys)."),
    model: str = typer.Option(..., "--model", help="Local model folder or hub id."),
    revision: str | None = typer.Option(None, "--revision", help="Hub branch, tag or commit (hub ids only)."),
    train_file: Path = typer.Option(..., "--train", help="Training data."),
    validation: Path | None = typer.Option(None, "--validation", help="Validation data."),
    out: Path = typer.Option(Path("."), "--out", help="Where the run will write (for the disk checks)."),
    memory_cap: str | None = typer.Option(
        None,
        "--memory-cap",
        envvar="TUNEDECK_MEMORY_CAP",
        help="Simulate a smaller accelerator (or host) for the memory fit, e.g. 24GiB.",
    ),
    time_budget: float | None = typer.Option(
        None, "--time-budget", help="Fail check 8 when the projected run takes longer (seconds)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run the checks before a long training; exit 1 if any fails."""
    from tunedeck.config.loading import load_config_file
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.preflight import PreflightOptions, run_preflight
    from tunedeck.engine.training.run_spec import RunSpec

    cap = parse_bytes(memory_cap) if memory_cap else None
    with reported_errors():
        spec = RunSpec(
            config=load_config_file(config),
            model=ModelRef(model, revision),
            train_path=train_file,
            out_dir=out,
            validation_path=validation,
        )
        report = run_preflight(spec, memory_cap_bytes=cap, options=PreflightOptions(time_budget_s=time_budget))
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        render(report.to_dict())
    if not report.ok:
        raise typer.Exit(1)


def render(report: dict[str, Any]) -> None:
    """One row per check with its status and message, then the memory-fit decision."""
    table = Table("#", "check", "status", "result", title=f"preflight: {report['status']}")
    for check in report["checks"]:
        style = _STYLES[check["status"]]
        message = check["message"]
        if check["advice"]:
            message += "\n→ " + "\n→ ".join(check["advice"])
        table.add_row(str(check["number"]), check["name"], f"[{style}]{check['status']}[/{style}]", message)
    console.print(table)
    fit = report.get("memory_fit")
    if fit:
        console.print(
            f"memory fit: micro-batch {fit['micro_batch']} × accumulation {fit['accumulation']} "
            f"(asked {fit['requested_micro_batch']} × {fit['requested_accumulation']}): {fit['explanation']}"
        )
