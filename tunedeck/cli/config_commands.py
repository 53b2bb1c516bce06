"""`tunedeck config validate | schema | recipes | show`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.config.loading import check_config_file, config_schema
from tunedeck.config.recipes import get_recipe, list_recipes

app = typer.Typer(help="Validate configs, print the JSON Schema, list and show recipes.", no_args_is_help=True)
console = Console()


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="JSON config file."),
    examples: int | None = typer.Option(
        None, "--examples", min=1, help="Training rows: also check the step count and warmup it gives."
    ),
) -> None:
    """Validate a config file: exit 0 when valid (warnings included), 1 with every problem otherwise."""
    with reported_errors():
        check = check_config_file(file, train_examples=examples)
    console.print(f"[green]valid[/green]: {file}", highlight=False)
    for warning in check.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning.render())}", highlight=False, soft_wrap=True)
    console.print_json(json.dumps(check.config.to_json_dict()))


@app.command("schema")
def schema() -> None:
    """Print the JSON Schema of the training config."""
    typer.echo(json.dumps(config_schema(), indent=2))


@app.command("recipes")
def recipes() -> None:
    """List the shipped recipes."""
    table = Table("name", "title", "keys")
    for recipe in list_recipes():
        table.add_row(recipe.name, recipe.title, str(len(recipe.values)))
    console.print(table)


@app.command("show")
def show(name: str = typer.Argument(..., help="Recipe name (see `tunedeck config recipes`).")) -> None:
    """Print one recipe's config, verbatim as shipped."""
    with reported_errors():
        recipe = get_recipe(name)
        recipe.config()
    typer.echo(json.dumps(recipe.values, indent=2))
