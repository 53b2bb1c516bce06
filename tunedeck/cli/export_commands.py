"""`tunedeck export` and `tunedeck generate`: a job's (or a local run's) model, exported or prompted.

`--job ID` reads the job store and artifact storage named by the `TUNEDECK_*` settings
(as an operator: every user's jobs) and downloads the committed model, verified;
`--run-dir DIR` reads a local run directory. `--checkpoint STEP` picks a checkpoint
instead of the final model.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, Operator, open_stores

console = Console()


def _refuse(message: str, field: str) -> None:
    from tunedeck.core.errors import ConfigError, Issue

    raise ConfigError([Issue(message, field=field)], title="invalid command")


@contextmanager
def _model_source(
    job: str | None, run_dir: Path | None, checkpoint: int | None, database_url: str | None
) -> Iterator[tuple[Any, dict[str, Any] | None, str | None, list[dict[str, Any]]]]:
    """The model folder to use, the base the job names (None for a run directory), a title, and the job's
    datasets with their recorded rights (none for a run directory)."""
    from tunedeck.engine.export.source import locate_model_folder, model_folder_from_spec

    if (job is None) == (run_dir is None):
        _refuse("give exactly one of --job or --run-dir", "--job")
    if run_dir is not None:
        yield locate_model_folder(run_dir, checkpoint), None, None, []
        return
    from tunedeck.service.jobs.job_models import fetch_job_model, locate_job_model

    store, artifacts = open_stores(database_url)
    with store, tempfile.TemporaryDirectory(prefix="tunedeck-job-model-") as scratch:
        located = locate_job_model(store, artifacts, Operator(), str(job), checkpoint)
        spec = fetch_job_model(artifacts, located, Path(scratch))
        yield model_folder_from_spec(spec), located.base, located.job_name, list(spec["datasets"])


def _base_ref(base: str | None, revision: str | None, job_base: dict[str, Any] | None) -> Any:
    from tunedeck.engine.models.model_source import ModelRef

    if base is not None:
        return ModelRef(base, revision)
    if job_base is not None:
        return ModelRef(job_base["name"], job_base.get("revision"))
    return None  # the base the model folder is pinned to


def export(
    export_format: str = typer.Option(..., "--format", help="adapter | merged | bundle | mlx"),
    out: Path = typer.Option(..., "--out", help="New (or empty) folder to write the export into."),
    job: str | None = typer.Option(None, "--job", help="Job id (model from artifact storage)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Local run directory."),
    checkpoint: int | None = typer.Option(None, "--checkpoint", min=0, help="Checkpoint step (default: final)."),
    base: str | None = typer.Option(None, "--base", help="Base model to merge onto (default: the pinned one)."),
    revision: str | None = typer.Option(None, "--revision", help="Hub revision of --base."),
    allow_base_mismatch: bool = typer.Option(
        False, "--allow-base-mismatch", help="Merge even onto a base other than the pinned one (a warning)."
    ),
    max_shard_size: str = typer.Option("5GB", "--max-shard-size", help="Largest safetensors shard of a merge."),
    dtype: str = typer.Option("float16", "--dtype", help="mlx: the weights' dtype (float16 | bfloat16 | float32)."),
    quantize_bits: int | None = typer.Option(
        None, "--quantize-bits", help="mlx: quantise the merged weights with mlx-lm to 4 or 8 bits."
    ),
    mlx_contents: str = typer.Option(
        "merged", "--mlx-contents", help="mlx: merged, or adapter (the converted base with the adapter in adapter/)."
    ),
    unified_memory_gb: float | None = typer.Option(
        None, "--unified-memory-gb", min=0.001, help="mlx: refuse unless the export fits a Mac with this much memory."
    ),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Export a final model or checkpoint: a pinned adapter, a merged model, a bundle with its model card,
    or an MLX model for Apple silicon."""
    from tunedeck.core.mlx_export import MlxExportOptions
    from tunedeck.engine.export.exporter import export_model

    with (
        reported_errors(),
        _model_source(job, run_dir, checkpoint, database_url) as (folder, job_base, title, datasets),
    ):
        result = export_model(
            folder,
            export_format,
            out,
            base=_base_ref(base, revision, job_base),
            allow_base_mismatch=allow_base_mismatch,
            max_shard_size=max_shard_size,
            title=title,
            datasets=datasets,
            mlx=MlxExportOptions(mlx_contents, dtype, quantize_bits) if export_format == "mlx" else None,
            unified_memory_gb=unified_memory_gb,
        )
    table = Table("", "", title=f"{result.format} export of {result.source}", show_header=False)
    table.add_row("folder", str(result.out))
    table.add_row("contents", result.contents)
    table.add_row("files", ", ".join(result.files))
    if result.pin:
        version = result.pin.get("revision") or result.pin.get("fingerprint")
        table.add_row("pinned base", f"{result.pin['model_id']} ({version})")
    console.print(table)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)


def generate(
    prompt: str | None = typer.Option(None, "--prompt", help="Prompt (a user turn for a chat-trained model)."),
    messages: Path | None = typer.Option(None, "--messages", help="JSON file: a list of {role, content} turns."),
    job: str | None = typer.Option(None, "--job", help="Job id (model from artifact storage)."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Local run directory."),
    checkpoint: int | None = typer.Option(None, "--checkpoint", min=0, help="Checkpoint step (default: final)."),
    base: str | None = typer.Option(None, "--base", help="Base model for an adapter (default: the pinned one)."),
    revision: str | None = typer.Option(None, "--revision", help="Hub revision of --base."),
    compare_base: bool = typer.Option(False, "--compare-base", help="Also answer with the base model."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", min=1, max=4096),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (> 0)."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling mass (0 < top_p <= 1)."),
    sample: bool = typer.Option(False, "--sample", help="Sample (seeded) instead of greedy decoding."),
    seed: int = typer.Option(0, "--seed"),
    allow_base_mismatch: bool = typer.Option(False, "--allow-base-mismatch", help="Load onto another base anyway."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Generate from a final model or checkpoint, with the chat template applied as in training."""
    from tunedeck.engine.generation.generation import Generator, SamplingOptions

    with reported_errors():
        conversation = None
        if messages is not None:
            conversation = json.loads(messages.read_text(encoding="utf-8"))
        with _model_source(job, run_dir, checkpoint, database_url) as (folder, job_base, _, _datasets):
            generator = Generator.load(
                folder,
                base=_base_ref(base, revision, job_base),
                allow_base_mismatch=allow_base_mismatch,
                compare_base=compare_base,
            )
            result = generator.run(
                prompt,
                messages=conversation,
                options=SamplingOptions(max_new_tokens, temperature, top_p, sample, seed),
                compare_base=compare_base,
            )
    if json_out:
        typer.echo(json.dumps(result.to_dict()))  # one line, unwrapped: for scripts
        return
    console.print(f"[bold]fine-tuned ({result.source}):[/bold]", highlight=False)
    console.print(result.fine_tuned.text, markup=False, highlight=False)
    if result.base is not None:
        console.print("[bold]base:[/bold]", highlight=False)
        console.print(result.base.text, markup=False, highlight=False)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
