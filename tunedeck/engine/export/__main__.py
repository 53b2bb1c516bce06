"""`python -m tunedeck.engine.export --spec FILE`: one export, its `export.json` printed as one JSON line.

Spec keys: `format` (adapter | merged | bundle | mlx), `out` (new folder), the model (either
`run_dir` with an optional `checkpoint` step, or `model_dir` with `label` and an optional
`run_root` holding the run documents), and optionally `base` (`{"name", "revision"}`),
`allow_base_mismatch`, `max_shard_size`, `title`, `datasets` (the training datasets' recorded
rights, which the model card lists), and for `mlx`: `mlx` (`{"contents", "dtype", "quantize_bits"}`)
and `unified_memory_gb`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tunedeck.engine.json_process import run_spec_main


def handle(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the export a spec describes."""
    from tunedeck.core.mlx_export import MlxExportOptions
    from tunedeck.engine.export.exporter import DEFAULT_MAX_SHARD_SIZE, export_model
    from tunedeck.engine.export.source import model_folder_from_spec
    from tunedeck.engine.models.model_source import ModelRef

    base = spec.get("base")
    result = export_model(
        model_folder_from_spec(spec),
        str(spec.get("format")),
        Path(spec["out"]),
        base=ModelRef(base["name"], base.get("revision")) if base else None,
        allow_base_mismatch=bool(spec.get("allow_base_mismatch", False)),
        max_shard_size=str(spec.get("max_shard_size") or DEFAULT_MAX_SHARD_SIZE),
        title=spec.get("title"),
        datasets=[dict(entry) for entry in spec.get("datasets") or [] if isinstance(entry, dict)],
        mlx=MlxExportOptions.from_dict(spec["mlx"]) if isinstance(spec.get("mlx"), dict) else None,
        unified_memory_gb=float(spec["unified_memory_gb"]) if spec.get("unified_memory_gb") else None,
    )
    return result.to_dict()


if __name__ == "__main__":
    sys.exit(run_spec_main("python -m tunedeck.engine.export", handle, None))
