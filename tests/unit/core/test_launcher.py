"""The one launcher: the command lines it builds and how it reads a multi-process run's status back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.launcher import GROUP_RESTARTS, launch_command, launched_exit_code, written_exit_code


def test_one_process_runs_the_module_and_several_run_it_under_torchrun() -> None:
    module = ["-m", "tunedeck.cli.main", "train"]
    assert launch_command(module) == [sys.executable, *module]
    several = launch_command(module, 3)
    assert several[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=3" in several and f"--max-restarts={GROUP_RESTARTS}" in several
    assert several[-3:] == module


def test_rank_zeros_written_status_wins_over_the_launchers(tmp_path: Path) -> None:
    outcome = tmp_path / "outcome.json"
    outcome.write_text(json.dumps({"exit": ExitCode.PAUSED}), encoding="utf-8")
    assert written_exit_code(outcome) == ExitCode.PAUSED
    assert launched_exit_code(outcome, 0) == ExitCode.PAUSED
    assert launched_exit_code(outcome, 1, unreported=ExitCode.FAILED) == ExitCode.PAUSED


def test_without_a_written_status_the_launchers_own_counts(tmp_path: Path) -> None:
    missing, garbled = tmp_path / "none.json", tmp_path / "garbled.json"
    garbled.write_text("{not json", encoding="utf-8")
    for outcome in (missing, garbled):
        assert written_exit_code(outcome) is None
        assert launched_exit_code(outcome, 0) == 0
        assert launched_exit_code(outcome, 7, unreported=ExitCode.FAILED) == 7
        # A launcher that exited 0 while rank 0 never said how the run ended, where the caller calls that a failure.
        assert launched_exit_code(outcome, 0, unreported=ExitCode.FAILED) == ExitCode.FAILED
