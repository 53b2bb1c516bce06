"""Running an engine module in its own process and reading its JSON answer.

The worker never imports the engine (or torch): for a work item (export, generation,
preflight, inspection) it writes a spec file, launches
`python -m tunedeck.engine.<module> --spec FILE` (as it launches `tunedeck.engine.child`
for training), and reads the one JSON line the module prints
(`tunedeck.engine.json_process`: exit 0 result, exit 2 refusal with issues, else a crash).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tunedeck.core.errors import Issue, IssueListError, TunedeckError
from tunedeck.core.exit_codes import ExitCode

ENGINE_MODULES = frozenset({"export", "generation", "ingestion", "inspection", "preflight", "ray_cluster"})
# Work items run at a lower CPU priority than the server beside them: on a host that also serves the
# API and dashboard (an embedded worker), eight engine processes at equal priority made every route
# wait for a core. On a worker of its own, nothing competes and the niceness changes nothing.
WORK_NICENESS = 10
PROGRESS_POLL_S = 1.0
_TAIL_CHARS = 2000


class EngineProcessError(TunedeckError):
    """The engine process crashed or ran out of time."""


class EngineStoppedError(EngineProcessError):
    """The engine process was stopped because its work item no longer wants it (cancelled, or the claim lapsed)."""


class EngineRefusedError(IssueListError):
    """The engine refused the request on its input; `kind` names the engine's error class."""

    def __init__(self, title: str, issues: list[Issue], kind: str) -> None:
        super().__init__(issues=issues, title=title)
        self.kind = kind


def run_engine_module(
    module: str,
    spec: dict[str, Any],
    work_dir: Path,
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run `tunedeck.engine.<module>` on `spec` (written into `work_dir`) and return its JSON result.

    With `on_progress`, the spec gets a `progress_file` that the module rewrites as it goes;
    each new content is handed to `on_progress` about once a second. `should_stop` is asked
    as often: once it answers True the process is killed and EngineStoppedError raised.
    The process dies with this one (it is given this pid): a killed worker leaves no orphan.
    """
    if module not in ENGINE_MODULES:
        raise ValueError(f"not an engine process module: {module!r}")
    work_dir.mkdir(parents=True, exist_ok=True)
    progress_path = work_dir / f"{module}-progress.json"
    if on_progress is not None:
        spec = {**spec, "progress_file": str(progress_path)}
    spec_path = work_dir / f"{module}-spec.json"
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    command = engine_command(module, spec_path)
    deadline = time.monotonic() + timeout_s
    seen: dict[str, Any] | None = None
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:  # fmt: skip
        lower_priority(process.pid)
        while True:
            try:
                # Retrying communicate after its timeout loses no output.
                stdout, stderr = process.communicate(
                    timeout=min(PROGRESS_POLL_S, max(0.01, deadline - time.monotonic()))
                )
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    process.kill()
                    process.communicate()
                    raise EngineProcessError(
                        f"the {module} process took longer than {timeout_s:.0f} s and was stopped"
                    ) from None
                if should_stop is not None and should_stop():
                    process.kill()
                    process.communicate()
                    raise EngineStoppedError(
                        f"the {module} process was stopped: its work item was cancelled, or this worker lost its claim"
                    ) from None
                seen = _pass_on_progress(progress_path, seen, on_progress)
    _pass_on_progress(progress_path, seen, on_progress)  # what it wrote last, between two polls
    answer = _last_json_line(stdout)
    if process.returncode == 0 and answer is not None:
        return answer
    if process.returncode == ExitCode.REFUSED and answer is not None and "error" in answer:
        issues = [Issue(**issue) for issue in answer.get("issues") or []] or [Issue(str(answer["error"]))]
        raise EngineRefusedError(str(answer["error"]), issues, str(answer.get("kind") or ""))
    raise EngineProcessError(
        f"the {module} process failed (exit {process.returncode}): {stderr[-_TAIL_CHARS:].strip()}"
    )


def engine_command(module: str, spec_path: Path) -> list[str]:
    """The command that runs engine module `module` on the spec at `spec_path`, tied to this process's life."""
    engine = f"tunedeck.engine.{module}"
    return [sys.executable, "-m", engine, "--spec", str(spec_path), "--parent-pid", str(os.getpid())]


def lower_priority(pid: int) -> None:
    """Run process `pid` at WORK_NICENESS (see there why)."""
    # The process may have ended already, or the platform refuse: it then runs at the worker's priority.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, WORK_NICENESS)


def _pass_on_progress(
    path: Path, seen: dict[str, Any] | None, on_progress: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any] | None:
    """Hand the progress file's content to `on_progress` when it changed; what was seen now."""
    current = _read_progress(path) if on_progress is not None else None
    if on_progress is None or current is None or current == seen:
        return seen
    on_progress(current)
    return current


def _read_progress(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None  # not written yet
    return value if isinstance(value, dict) else None


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
