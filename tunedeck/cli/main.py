"""The `tunedeck` command: one Typer app, each command group in its own module.

Heavy libraries (torch, transformers) are imported inside commands, never here,
so `tunedeck --help` stays fast.
"""

from __future__ import annotations

import typer

from tunedeck.cli import (
    backup_commands,
    config_commands,
    data_commands,
    data_inspect_command,
    deletions_commands,
    demo_command,
    env_command,
    eval_commands,
    export_commands,
    keys_commands,
    models_commands,
    plan_commands,
    preflight_command,
    retention_commands,
    serve_command,
    sweep_commands,
    train_commands,
    users_commands,
    worker_command,
)
from tunedeck.core.file_modes import restrict_new_files

app = typer.Typer(
    name="tunedeck",
    help="Self-hostable fine-tuning of language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(config_commands.app, name="config")
app.add_typer(users_commands.app, name="users")
app.add_typer(retention_commands.app, name="retention")
app.add_typer(deletions_commands.app, name="deletions")
app.add_typer(backup_commands.app, name="backup")
app.add_typer(models_commands.app, name="models")
app.command("train")(train_commands.train)
app.add_typer(data_commands.app, name="data")
data_inspect_command.register(data_commands.app)
app.command("preflight")(preflight_command.preflight)
app.command("env")(env_command.env)
app.command("worker")(worker_command.worker)
app.command("demo")(demo_command.demo)
app.command("serve")(serve_command.serve)
app.command("sweep")(sweep_commands.sweep)
app.add_typer(eval_commands.app, name="eval")
app.command("compare")(eval_commands.compare)
app.command("export")(export_commands.export)
app.command("generate")(export_commands.generate)
app.add_typer(keys_commands.app, name="keys")
app.add_typer(plan_commands.app, name="plan")


def main() -> None:
    """Console entry point: every file and folder a command (and its child processes) writes is private."""
    restrict_new_files()
    app()


if __name__ == "__main__":
    main()
