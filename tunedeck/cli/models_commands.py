"""`tunedeck models create-tiny | allow-code | facts`: build a tiny local model; let a base model's own code run;
say what a model folder's files tell of it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store
from tunedeck.core.errors import DataError, Issue

app = typer.Typer(help="Build and inspect base models.", no_args_is_help=True)
console = Console()


@app.command("create-tiny")
def create_tiny(
    arch: str = typer.Option(..., "--arch", help="llama, gpt2 or bert."),
    out: Path = typer.Option(..., "--out", help="Folder to create (must not exist or be empty)."),
    corpus: Path | None = typer.Option(None, "--corpus", help="UTF-8 text, one document a line."),
) -> None:
    """Train a small BPE tokenizer and build a small model in OUT, with no download."""
    from tunedeck.demo.tiny_models import TINY_ARCHS, create_tiny_model, read_corpus_file

    with reported_errors():
        if arch not in TINY_ARCHS:
            raise DataError(
                [Issue("unknown architecture", field="--arch", expected=" | ".join(TINY_ARCHS), found=arch)],
                title="invalid option",
            )
        if out.exists() and any(out.iterdir()):
            raise DataError([Issue("the output folder is not empty", file=str(out))], title="invalid option")
        texts = read_corpus_file(corpus) if corpus is not None else None
        info = create_tiny_model(arch, out, corpus=texts)
    pretrain = (
        f", pretrained {info.pretrain_steps} steps"
        f" (loss {info.pretrain_loss_first:.2f} → {info.pretrain_loss_last:.2f})"
        if info.pretrain_steps and info.pretrain_loss_first is not None and info.pretrain_loss_last is not None
        else ""
    )
    console.print(
        f"[green]created[/green] {info.arch} at {info.path}: {info.parameters:,} parameters, "
        f"vocabulary {info.vocab_size}{pretrain}"
    )


@app.command("allow-code")
def allow_code(
    base_model_id: str = typer.Argument(..., help="The base model's id (bm_…)."),
    by: str = typer.Option(..., "--by", help="The admin user this decision is recorded under."),
    revoke: bool = typer.Option(False, "--revoke", help="Withdraw the permission instead."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Allow jobs with trust_remote_code to run this base model's own code (auto_map), or withdraw it."""
    with reported_errors(), open_job_store(database_url) as store:
        admin = store.users.get_user_by_name(by)
        row = store.base_models.set_remote_code(admin, base_model_id, allowed=not revoke)
    verb = "may no longer run" if revoke else "may now run"
    console.print(f"base model [bold]{row.name}[/bold] ({row.id}): jobs {verb} its own code", highlight=False)


@app.command("facts")
def facts(folder: Path = typer.Argument(..., help="A model folder (config.json and *.safetensors).")) -> None:
    """Parameters, size on disk, architecture, licence and chat template, read from FOLDER's files (never loaded)."""
    from tunedeck.core.model_facts import format_bytes, format_parameters, read_model_facts

    with reported_errors():
        if not (folder / "config.json").is_file():
            raise DataError(
                [Issue("not a model folder", file=str(folder), expected="a folder with config.json")],
                title="invalid argument",
            )
        found = read_model_facts(folder)
    unknown = "not known"
    lines = {
        "parameters": f"{found.parameters:,} ({format_parameters(found.parameters)})"
        if found.parameters is not None
        else unknown,
        "size on disk": format_bytes(found.size_bytes) if found.size_bytes is not None else unknown,
        "architecture": found.architecture or found.model_type or unknown,
        "licence": found.licence or "not found in its files",
        "chat template": unknown if found.chat_template is None else ("yes" if found.chat_template else "no"),
    }
    for label, value in lines.items():
        console.print(f"{label}: {value}", markup=False, highlight=False)
