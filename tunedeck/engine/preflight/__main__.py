"""`python -m tunedeck.engine.preflight --spec FILE`: the preflight checks for the API's "Run preflight" button.

The spec is a run spec (`config`, `model`, `train`, `validation`, `out`); the
result is the report of the checks, printed as one JSON line.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from tunedeck.engine.json_process import PROGRESS_KEY, progress_reporter, run_spec_main


def preflight_from_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Run every check on the run the spec describes; the report's JSON form.

    With a `progress_file`, each check's start is written there (`done`, `total`, `check`).
    """
    from tunedeck.engine.preflight.report import CHECK_TITLES
    from tunedeck.engine.preflight.runner import run_preflight
    from tunedeck.engine.training.run_spec import RunSpec

    # The imports live as long as the process: frozen, the collections before each measured step skip them.
    gc.collect()
    gc.freeze()
    progress = progress_reporter(spec)

    def on_check(done: int, total: int, number: int | None) -> None:
        check = CHECK_TITLES[number][1] if number is not None else "done"
        progress({"done": done, "total": total, "check": check}, final=number is None)

    run_spec = RunSpec.from_dict({k: v for k, v in spec.items() if k != PROGRESS_KEY}, "preflight spec")
    return run_preflight(run_spec, on_check=on_check).to_dict()


def main(argv: list[str] | None = None) -> int:
    """Entry point: `--spec FILE` in, one JSON line out (see `tunedeck.engine.json_process`)."""
    return run_spec_main("python -m tunedeck.engine.preflight", preflight_from_spec, argv)


if __name__ == "__main__":
    sys.exit(main())
