"""`tunedeck preflight --target mlx`: can mlx-lm open the MLX export of a saved model, and does it fit the Mac?"""

from __future__ import annotations

from pathlib import Path

from tunedeck.cli.checks_report import print_report
from tunedeck.cli.errors import reported_errors


def preflight_mlx(
    model: Path,
    *,
    checkpoint: int | None,
    base: str | None,
    revision: str | None,
    dtype: str,
    quantize_bits: int | None,
    mlx_contents: str,
    unified_memory_gb: float | None,
    as_json: bool,
) -> None:
    """Check the MLX export of `model` (a run directory or a saved model folder); exit 1 when a check fails."""
    from tunedeck.core.errors import ConfigError, Issue
    from tunedeck.core.mlx_export import MlxExportOptions
    from tunedeck.engine.export.mlx_target import check_model_folder
    from tunedeck.engine.export.source import ModelFolder, is_run_dir, locate_model_folder
    from tunedeck.engine.models.model_source import ModelRef

    options = MlxExportOptions(mlx_contents, dtype, quantize_bits)
    with reported_errors():
        problems = options.problems()
        if problems:
            raise ConfigError(
                [Issue("invalid MLX export option", field=f"--{name.replace('_', '-')}", expected=expected, found=found)
                 for name, expected, found in problems],
                title="invalid command",
            )
        folder = locate_model_folder(model, checkpoint) if is_run_dir(model) else ModelFolder(model, "final")
        report, _ = check_model_folder(
            folder, options, base=ModelRef(base, revision) if base else None, unified_memory_gb=unified_memory_gb
        )
    print_report(report.to_dict(), ok=report.ok, as_json=as_json)
