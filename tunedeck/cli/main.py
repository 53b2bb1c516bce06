"""The `tunedeck` command: one Typer app, each command group in its own module.

Heavy libraries (torch, transformers) are imported inside commands, never here,
so `tunedeck --help` stays fast.
"""

from __future__ import annotations

import typer

from tunedeck.cli import config_commands

app = typer.Typer(
    name="tunedeck",
    help="Self-hostable fine-tuning of language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(config_commands.app, name="config")


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
