"""`python -m tunedeck.engine.inspection --spec FILE`: a dataset after a base model's exact preprocessing.

The dashboard's loss-mask view needs the base model's tokenizer and chat template,
which the API never loads itself; it launches this module and stores the JSON it
prints (tokens tagged trained or masked, truncation, length statistics).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.engine.json_process import run_spec_main


def inspect_dataset(spec: dict[str, Any]) -> dict[str, Any]:
    """Inspect `spec["dataset"]` with the tokenizer of `spec["model"]` (`{"name", "revision"}`)."""
    from tunedeck.config.training import TrainingConfig
    from tunedeck.data.inspect import inspect_examples
    from tunedeck.data.loading import load_dataset
    from tunedeck.engine.models.model_loading import load_tokenizer
    from tunedeck.engine.models.model_source import ModelRef, resolve_model

    missing = [key for key in ("dataset", "model", "max_length") if spec.get(key) in (None, "")]
    if missing:
        raise ConfigError([Issue("missing", field=key) for key in missing], title="invalid inspection spec")
    config = TrainingConfig(
        max_length=int(spec["max_length"]),
        train_on_inputs=bool(spec.get("train_on_inputs", False)),
        trust_remote_code=bool(spec.get("trust_remote_code", False)),
        truncation=spec.get("truncation") or "refuse",
    )
    model = spec["model"]
    resolved = resolve_model(ModelRef(str(model["name"]), model.get("revision")))
    tokenizer = load_tokenizer(resolved, config)
    loaded = load_dataset(Path(spec["dataset"]), spec.get("format", "auto"))
    report = inspect_examples(
        loaded.rows,
        loaded.kind,
        tokenizer,
        max_length=config.max_length,
        n=int(spec.get("examples", 5)),
        train_on_inputs=config.train_on_inputs,
        row_numbers=loaded.line_numbers,
        max_prompt_length=int(spec["max_prompt_length"]) if spec.get("max_prompt_length") else None,
        truncation=config.truncation,
    )
    return report.to_dict()


def main(argv: list[str] | None = None) -> int:
    """Entry point: `--spec FILE` in, one JSON line out (see `tunedeck.engine.json_process`)."""
    return run_spec_main("python -m tunedeck.engine.inspection", inspect_dataset, argv)


if __name__ == "__main__":
    sys.exit(main())
