"""`python -m tunedeck.engine.preflight --spec FILE`: the preflight checks for the API's "Run preflight" button.

The spec is a run spec (`config`, `model`, `train`, `validation`, `out`); the
result is the report of the eight checks, printed as one JSON line.
"""

from __future__ import annotations

import sys
from typing import Any

from tunedeck.engine.json_process import run_spec_main


def preflight_from_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Run every check on the run the spec describes; the report's JSON form."""
    from tunedeck.engine.preflight.runner import run_preflight
    from tunedeck.engine.run_spec import RunSpec

    return run_preflight(RunSpec.from_dict(spec, "preflight spec")).to_dict()


def main(argv: list[str] | None = None) -> int:
    """Entry point: `--spec FILE` in, one JSON line out (see `tunedeck.engine.json_process`)."""
    return run_spec_main("python -m tunedeck.engine.preflight", preflight_from_spec, argv)


if __name__ == "__main__":
    sys.exit(main())
