"""A report of checks printed for people (one row per check, then the memory fit) or as JSON.

`tunedeck preflight` prints the checks before a training or an MLX export with it, and `tunedeck
train` the table of the checks that refused a run.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

console = Console()

_STYLES = {"pass": "green", "warn": "yellow", "fail": "red", "skip": "grey50"}


def print_report(report: dict[str, Any], *, ok: bool, as_json: bool) -> None:
    """Print a checks report (JSON, or one row per check) and exit 1 when a check failed."""
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        render(report)
    if not ok:
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
        # Whole-dataset packing asks for one packed row per micro-batch itself: its line says what the job asked.
        asked = "" if fit.get("packed_rows") else f" (asked {fit['requested_micro_batch']} × " \
            f"{fit['requested_accumulation']})"
        console.print(
            f"memory fit: micro-batch {fit['micro_batch']} × accumulation {fit['accumulation']}{asked}: "
            f"{fit['explanation']}"
        )
        if fit.get("packed_rows"):
            console.print(fit["packed_rows"])
