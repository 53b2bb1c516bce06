"""`scripts/check_host.py`'s entry: the report, the exit status, and the plan `make install` sources."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.hostcheck.machines import GB, REPO, linux, nvidia_smi
from tunedeck.hostcheck import main as entry
from tunedeck.hostcheck.host import HostFacts


def _check(monkeypatch: pytest.MonkeyPatch, facts: HostFacts, *args: str) -> int:
    monkeypatch.setattr(entry, "gather_host_facts", lambda run, install_dir: facts)
    monkeypatch.delenv("TORCH_VARIANT", raising=False)
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    return entry.main(list(args), repo=REPO)


def test_an_nvidia_machine_gets_a_plan_with_the_cuda_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "venv" / "host-plan.env"
    assert _check(monkeypatch, linux(nvidia_smi("580.95.05", "13.0")), "--plan", str(plan)) == 0
    report = capsys.readouterr().out
    assert "gpu 0    NVIDIA H100 80GB HBM3, 80 GiB, driver 580.95.05, CUDA ≤ 13.0" in report
    assert "torch 2.13.0, variant cuda: 2 NVIDIA GPUs found by nvidia-smi" in report
    assert plan.read_text() == "TORCH_VARIANT=cuda\nTORCH_INDEX_URL=''\nLOCK_ARGS='-r requirements-cuda.lock'\n"
    sourced = subprocess.run(
        ["sh", "-c", f'. "{plan}" && printf "%s|%s" "$TORCH_VARIANT" "$LOCK_ARGS"'], capture_output=True, text=True
    )
    assert sourced.stdout == "cuda|-r requirements-cuda.lock"


def test_a_blocking_problem_exits_1_and_writes_no_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "host-plan.env"
    assert _check(monkeypatch, linux(free_disk_bytes=1 * GB), "--plan", str(plan)) == 1
    report = capsys.readouterr().out
    assert "BLOCKING: 1.0 GB free" in report and "  fix: free disk there" in report
    assert "Nothing was installed" in report and not plan.exists()


def test_the_script_runs_alone_on_this_machine() -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "check_host.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("tunedeck host check\n") and "torch 2.13.0, variant " in done.stdout
