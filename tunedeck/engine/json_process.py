"""The shape of engine modules the API launches as processes: `--spec FILE` in, one JSON line out.

Exit 0: the result object on stdout. Exit 2: refused on bad input (a TunedeckError: a
base-model mismatch, a secret in an export, a missing checkpoint); stdout holds
`{"error": ..., "kind": ..., "issues": [...]}` so the caller can answer precisely.
Exit 1: a crash; the traceback goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunedeck.core.errors import IssueListError, TunedeckError
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.parent_death import die_with_parent

PROGRESS_KEY = "progress_file"



def run_spec_main(prog: str, handler: Callable[[dict[str, Any]], dict[str, Any]], argv: list[str] | None) -> int:
    """Parse `--spec`, call `handler` with the spec's JSON object, print the outcome; the exit status."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--spec", required=True, type=Path, help="JSON spec file")
    parser.add_argument("--parent-pid", type=int, help="the worker's pid: this process dies with it")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)  # an orphan would go on ingesting or exporting for nobody, beside the retry
    try:
        spec = json.loads(args.spec.read_text(encoding="utf-8"))
        if not isinstance(spec, dict):
            raise TunedeckError(f"{args.spec}: the spec must be a JSON object")
        result = handler(spec)
    except (TunedeckError, OSError, json.JSONDecodeError) as error:
        print(json.dumps(refusal(error)), flush=True)
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return ExitCode.REFUSED
    print(json.dumps(result, allow_nan=False, default=str), flush=True)
    return ExitCode.SUCCEEDED


def refusal(error: Exception) -> dict[str, Any]:
    """The answer to a request refused on its input: `error` (the message), `kind` (the error's class), `issues`."""
    issues = [issue.to_dict() for issue in error.issues] if isinstance(error, IssueListError) else []
    message = error.title if isinstance(error, IssueListError) else str(error)
    return {"error": message, "kind": type(error).__name__, "issues": issues}


def progress_reporter(spec: dict[str, Any], every_s: float = 0.0) -> Callable[..., None]:
    """What a module calls with its progress: rewrites the spec's `progress_file` whole (at most every
    `every_s` seconds, the last call always kept when `final=True` is passed), or does nothing without one."""
    from tunedeck.core.atomic_files import write_json_atomic

    target = Path(spec[PROGRESS_KEY]) if spec.get(PROGRESS_KEY) else None
    last = -float("inf")

    def report(progress: dict[str, Any], final: bool = False) -> None:
        nonlocal last
        now = time.monotonic()
        if target is not None and (final or now - last >= every_s):
            last = now
            write_json_atomic(target, progress)

    return report
