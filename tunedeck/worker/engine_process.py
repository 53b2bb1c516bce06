"""Running an engine module in its own process and reading its JSON answer.

The worker never imports the engine (or torch): for a work item (export, generation,
preflight, inspection) it writes a spec file, launches
`python -m tunedeck.engine.<module> --spec FILE` (as it launches `tunedeck.engine.child`
for training), and reads the one JSON line the module prints
(`tunedeck.engine.json_process`: exit 0 result, exit 2 refusal with issues, else a crash).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tunedeck.core.errors import Issue, IssueListError, TunedeckError

ENGINE_MODULES = frozenset({"export", "generation", "inspection", "preflight"})
EXIT_REFUSED = 2
_TAIL_CHARS = 2000


class EngineProcessError(TunedeckError):
    """The engine process crashed or ran out of time."""


class EngineRefusedError(IssueListError):
    """The engine refused the request on its input; `kind` names the engine's error class."""

    def __init__(self, title: str, issues: list[Issue], kind: str) -> None:
        super().__init__(issues=issues, title=title)
        self.kind = kind


def run_engine_module(
    module: str, spec: dict[str, Any], work_dir: Path, *, timeout_s: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run `tunedeck.engine.<module>` on `spec` (written into `work_dir`) and return its JSON result."""
    if module not in ENGINE_MODULES:
        raise ValueError(f"not an engine process module: {module!r}")
    work_dir.mkdir(parents=True, exist_ok=True)
    spec_path = work_dir / f"{module}-spec.json"
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    command = [sys.executable, "-m", f"tunedeck.engine.{module}", "--spec", str(spec_path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise EngineProcessError(f"the {module} process took longer than {timeout_s:.0f} s and was stopped") from None
    answer = _last_json_line(done.stdout)
    if done.returncode == 0 and answer is not None:
        return answer
    if done.returncode == EXIT_REFUSED and answer is not None and "error" in answer:
        issues = [Issue(**issue) for issue in answer.get("issues") or []] or [Issue(str(answer["error"]))]
        raise EngineRefusedError(str(answer["error"]), issues, str(answer.get("kind") or ""))
    raise EngineProcessError(
        f"the {module} process failed (exit {done.returncode}): {done.stderr[-_TAIL_CHARS:].strip()}"
    )


def _last_json_line(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue  # libraries may print progress lines before the answer
        return value if isinstance(value, dict) else None
    return None


@contextmanager
def scratch_folder(root: Path, prefix: str) -> Iterator[Path]:
    """A private temporary folder under `root` (the worker's scratch dir), removed afterwards."""
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
