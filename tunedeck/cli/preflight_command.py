"""`tunedeck preflight`: the checks before a long training, as a table or JSON; exit 1 when one fails.

`--target mlx` checks an MLX export of a trained model instead (`preflight_mlx`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from tunedeck.cli.checks_report import print_report
from tunedeck.cli.errors import reported_errors
from tunedeck.cli.preflight_mlx import preflight_mlx


def parse_bytes(text: str) -> int:
    """`12GiB`, `512M` or a plain byte count, as bytes (binary units); a bad value is a usage error."""
    from tunedeck.engine.preflight.memory_cap import parse_size

    try:
        return parse_size(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def preflight(
    config: Path | None = typer.Option(None, "--config", help="JSON training config (the job config keys)."),
    model: str = typer.Option(
        ..., "--model", help="Local model folder or hub id (--target mlx: a run directory or saved model folder)."
    ),
    revision: str | None = typer.Option(None, "--revision", help="Hub branch, tag or commit (hub ids only)."),
    train_file: Path | None = typer.Option(None, "--train", help="Training data (required for a training)."),
    validation: Path | None = typer.Option(None, "--validation", help="Validation data."),
    out: Path = typer.Option(Path("."), "--out", help="Where the run will write (for the disk checks)."),
    memory_cap: str | None = typer.Option(
        None,
        "--memory-cap",
        help="Simulate a smaller accelerator (or host) for the memory fit, e.g. 24GiB [default: TUNEDECK_MEMORY_CAP].",
    ),
    time_budget: float | None = typer.Option(
        None, "--time-budget", help="Fail check 8 when the projected run takes longer (seconds)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    target: str = typer.Option("training", "--target", help="training, or mlx: check an MLX export of --model."),
    checkpoint: int | None = typer.Option(None, "--checkpoint", min=0, help="mlx: checkpoint step (default: final)."),
    base: str | None = typer.Option(None, "--base", help="mlx: the adapter's base model (default: the pinned one)."),
    dtype: str = typer.Option("float16", "--dtype", help="mlx: float16 | bfloat16 | float32."),
    quantize_bits: int | None = typer.Option(None, "--quantize-bits", help="mlx: 4 or 8 (merged exports)."),
    mlx_contents: str = typer.Option("merged", "--mlx-contents", help="mlx: merged, or adapter (base + adapter)."),
    unified_memory_gb: float | None = typer.Option(
        None, "--unified-memory-gb", min=0.001, help="mlx: the Mac's unified memory, to check the export fits."
    ),
) -> None:
    """Run the checks before a long training (or, with --target mlx, before an MLX export); exit 1 if any fails."""
    if target == "mlx":
        preflight_mlx(
            Path(model), checkpoint=checkpoint, base=base, revision=revision, dtype=dtype,
            quantize_bits=quantize_bits, mlx_contents=mlx_contents, unified_memory_gb=unified_memory_gb,
            as_json=as_json,
        )
        return
    if target != "training":
        raise typer.BadParameter(f"expected training or mlx, found {target!r}", param_hint="--target")
    if config is None or train_file is None:
        raise typer.BadParameter("a training's checks need --config and --train", param_hint="--config")
    from tunedeck.config.loading import load_config_file
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.preflight import PreflightOptions, run_preflight
    from tunedeck.engine.training.run_spec import RunSpec

    if memory_cap is None:
        from tunedeck.core.settings import Settings

        memory_cap = Settings().memory_cap  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
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
    print_report(report.to_dict(), ok=report.ok, as_json=as_json)
