"""`tunedeck plan create | show | list | start`: a machine's rental planned around an experiment's phases.

The commands read and write the job store named by the `TUNEDECK_*` settings (or
`--database-url`) as the server's operator, and plan exactly as the API does
(`tunedeck.service.plans.plan_sources`): a plan belongs to its experiment's owner.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.retention_commands import parse_now
from tunedeck.cli.store_access import DATABASE_HELP, Operator, open_stores

if TYPE_CHECKING:
    from tunedeck.api.schemas.plans import PlanOut

app = typer.Typer(help="Plan a 3-, 7- or 30-day machine rental around an experiment's phases.", no_args_is_help=True)
console = Console()
AT_HELP = "As of this time (ISO 8601, e.g. 2027-01-04T00:00:00Z; a time without a zone is UTC). Default: now."
JSON_HELP = "Print the plan as JSON (as the API answers)."


def _variant(text: str) -> dict[str, Any]:
    """`NAME` or `NAME:EPOCHS` as a variant of the request."""
    name, _, epochs = text.rpartition(":") if ":" in text else (text, "", "")
    if not name.strip():
        raise typer.BadParameter(f"{text!r}: expected NAME or NAME:EPOCHS", param_hint="--variant")
    if not epochs:
        return {"name": name.strip()}
    if not epochs.isdigit() or int(epochs) < 1:
        raise typer.BadParameter(f"{text!r}: the epochs after ':' must be a whole number ≥ 1", param_hint="--variant")
    return {"name": name.strip(), "epochs": int(epochs)}


def _request(fields: dict[str, Any]) -> Any:
    """The plan request, or a clear error naming each bad option."""
    from pydantic import ValidationError

    from tunedeck.api.schemas.plans import PlanCreate

    try:
        return PlanCreate.model_validate({key: value for key, value in fields.items() if value is not None})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'plan'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise typer.BadParameter(problems) from None


@app.command("create")
def create(
    experiment_id: str = typer.Argument(..., help="The experiment whose variants the rental is for."),
    device: str | None = typer.Option(None, "--device", help='Device type rented, e.g. "H100", "A100", "CPU".'),
    count: int = typer.Option(1, "--count", min=1, help="How many devices."),
    worker: str | None = typer.Option(None, "--worker", help="Rent this worker: the hardware its checks reported."),
    variant: list[str] = typer.Option(
        [], "--variant", help="A variant to try, NAME or NAME:EPOCHS, in running order (repeat it). Default: the jobs."
    ),
    price: float | None = typer.Option(None, "--price", min=0, help="The machine's price per hour."),
    days: int | None = typer.Option(None, "--days", help="The rental to track against: 3, 7 or 30 days."),
    margin: float = typer.Option(0.2, "--margin", min=0, help="Margin kept on top of the plan, a share of it."),
    train_rows: int | None = typer.Option(None, "--train-rows", min=1),
    validation_rows: int | None = typer.Option(None, "--validation-rows", min=0),
    test_rows: int | None = typer.Option(None, "--test-rows", min=0),
    train_dataset: str | None = typer.Option(None, "--train-dataset", help="Rows from its newest version."),
    validation_dataset: str | None = typer.Option(None, "--validation-dataset"),
    test_dataset: str | None = typer.Option(None, "--test-dataset", help="The sealed test set (its row count only)."),
    model_params: float | None = typer.Option(None, "--model-params", help="Base model parameters, e.g. 7e9."),
    tokens_per_row: int | None = typer.Option(None, "--tokens-per-row", min=1),
    efficiency: float = typer.Option(0.3, "--efficiency", help="Share of peak FLOPs the estimates assume."),
    preflight: str | None = typer.Option(None, "--preflight", help="A finished preflight item measured on it."),
    name: str | None = typer.Option(None, "--name", help="Default: the experiment's name."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Plan the rental: the phases' timeline, how it fits 3, 7 and 30 days, and what is measured or estimated."""
    if (device is None) == (worker is None):
        raise typer.BadParameter("give --device (with --count) or --worker, one of the two", param_hint="--device")
    if days is not None and days not in (3, 7, 30):
        raise typer.BadParameter(f"{days}: expected 3, 7 or 30", param_hint="--days")
    from tunedeck.planning.peak_flops import device_key

    machine = {"worker_id": worker} if device is None else {"device_type": device_key(device), "device_count": count}
    body = _request(
        {
            "experiment_id": experiment_id, "name": name, "machine": machine, "price_per_hour": price,
            "rental_days": days, "margin_share": margin, "variants": [_variant(text) for text in variant],
            "train_rows": train_rows, "validation_rows": validation_rows, "test_rows": test_rows,
            "train_dataset_id": train_dataset, "validation_dataset_id": validation_dataset,
            "test_dataset_id": test_dataset, "model_params": model_params, "tokens_per_row": tokens_per_row,
            "efficiency": efficiency, "preflight_id": preflight,
        }
    )  # fmt: skip
    from tunedeck.service.plans.plan_sources import create_plan, plan_out
    from tunedeck.store.types import utcnow

    with reported_errors():
        store, artifacts = open_stores(database_url)
        with store:
            row = create_plan(store, artifacts, Operator(), body)
            plan = plan_out(store, Operator(), row, utcnow())
    _print(plan, as_json)


@app.command("show")
def show(
    plan_id: str = typer.Argument(..., help="The plan's id."),
    now: str | None = typer.Option(None, "--now", help=AT_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """One plan: its phases, the rentals it fits, its figures, and once started where the rental stands."""
    from tunedeck.cli.store_access import open_job_store
    from tunedeck.service.plans.plan_sources import plan_out

    when = parse_now(now)
    with reported_errors(), open_job_store(database_url) as store:
        plan = plan_out(store, Operator(), store.plans.get(Operator(), plan_id), when)
    _print(plan, as_json)


@app.command("list")
def list_plans(
    experiment: str | None = typer.Option(None, "--experiment", help="Only this experiment's plans."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Every plan, newest first: its machine, its total and the shortest rental that holds it."""
    from tunedeck.cli.store_access import open_job_store
    from tunedeck.planning.durations import rental_duration
    from tunedeck.service.plans.plan_sources import plan_timeline

    with reported_errors(), open_job_store(database_url) as store:
        rows = store.plans.list(Operator(), experiment_id=experiment)
        table = Table("id", "name", "experiment", "machine", "planned", "shortest rental", "started")
        for row in rows:
            timeline = plan_timeline(row)
            shortest = timeline.shortest_rental_days
            table.add_row(
                row.id, escape(row.name), row.experiment_id, escape(_machine(row.machine)),
                rental_duration(timeline.needed_seconds), f"{shortest} days" if shortest else "none fits",
                row.started_at.isoformat(timespec="minutes") if row.started_at else "—",
            )  # fmt: skip
    if not rows:
        console.print("no plan yet", highlight=False)
        return
    console.print(table)


@app.command("start")
def start(
    plan_id: str = typer.Argument(..., help="The plan's id."),
    at: str | None = typer.Option(None, "--at", help="When the rental started. " + AT_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Record that the rental started: from then on the plan tracks the experiment's jobs against it."""
    from tunedeck.cli.store_access import open_job_store
    from tunedeck.service.plans.plan_sources import plan_out
    from tunedeck.store.types import utcnow

    when = parse_now(at)
    with reported_errors(), open_job_store(database_url) as store:
        row = store.plans.start(Operator(), plan_id, now=when)
        plan = plan_out(store, Operator(), row, utcnow())
    _print(plan, as_json=False)


def _machine(machine: dict[str, Any]) -> str:
    label = f"{machine.get('device_type')} × {machine.get('device_count')}"
    return f"{label} (worker {machine['worker_id']})" if machine.get("worker_id") else label


def _print(plan: PlanOut, as_json: bool) -> None:
    """The plan as JSON, or as tables: phases, rentals, figures, and the tracking once started."""
    if as_json:
        console.print_json(json.dumps(plan.model_dump(mode="json")))
        return
    from tunedeck.planning.durations import rental_duration

    timeline = plan.timeline
    console.print(
        f"[bold]{escape(plan.name)}[/bold] ({plan.id}) on {escape(_machine(plan.machine))}: "
        f"{rental_duration(timeline['total_seconds'])} planned, {rental_duration(timeline['needed_seconds'])} "
        f"with the {timeline['margin_share']:.0%} margin",
        highlight=False,
    )
    phases = Table("phase", "starts", "ends", "duration", "figures")
    for phase in timeline["phases"]:
        phases.add_row(
            escape(phase["label"]), rental_duration(phase["start_s"]), rental_duration(phase["end_s"]),
            rental_duration(phase["seconds"]), "estimated" if phase["estimated"] else "measured",
        )  # fmt: skip
    console.print(phases)
    rentals = Table("rental", "fits", "variants that fit", "spare", "cost")
    for fit in timeline["rentals"]:
        spare = rental_duration(fit["spare_seconds"])
        rentals.add_row(
            f"{fit['days']} days", "yes" if fit["fits"] else "no",
            f"{fit['variants_that_fit']} of {len(plan.workload['variants'])}",
            spare if fit["spare_seconds"] >= 0 else f"-{spare}",
            "—" if fit["cost"] is None else f"{fit['cost']:.2f}",
        )  # fmt: skip
    console.print(rentals)
    shortest = timeline["shortest_rental_days"]
    console.print(
        f"shortest rental that fits: {shortest} days" if shortest else "no rental of 30 days or less holds this plan",
        highlight=False,
    )
    figures = Table("figure", "value", "source", "basis")
    for key, figure in plan.figures.items():
        figures.add_row(key, f"{figure['value']:.4g} {figure['unit']}", figure["source"], escape(figure["basis"]))
    console.print(figures)
    if plan.tracking is not None:
        _print_tracking(plan.tracking)


def _print_tracking(tracking: dict[str, Any]) -> None:
    table = Table("phase", "status", "planned end", "projected end", "late")
    for phase in tracking["phases"]:
        table.add_row(
            escape(phase["label"]), phase["status"], phase["planned_end"][:16], phase["projected_end"][:16],
            "LATE" if phase["late"] else "",
        )  # fmt: skip
    console.print(table)
    console.print(f"rental ends {tracking['rental_end'][:16]}", highlight=False)
    for warning in tracking["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    for advice in tracking["advice"]:
        console.print(f"  - {escape(advice)}", highlight=False, soft_wrap=True)
