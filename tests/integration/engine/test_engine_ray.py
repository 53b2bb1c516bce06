"""A run on a Ray cluster (`python -m tunedeck.engine.ray_launch`) trains as the same run under torchrun.

One 2-worker CPU run of a tiny model on a local one-node cluster, in which rank 1 dies while
saving its part of the step-4 checkpoint (a lost worker, as when its node goes): Ray restarts
the group, the run resumes from checkpoint-2 (the newest complete one) and finishes. Every
step's loss, as logged before the worker was lost and after the resume, equals the same spec's loss
under `torchrun --nproc-per-node 2`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.ray_cluster import REPO_ROOT, LocalRayCluster
from tests.integration.engine.conftest import ReferenceRun
from tunedeck.core.checkpoint_parts import missing_parts

pytestmark = pytest.mark.slow

LAUNCH_TIMEOUT_S = 300


def _spec(folder: Path, reference: ReferenceRun) -> Path:
    """The reference run's spec (24 rows, 2 per process and step: 6 steps, a checkpoint every 2), in `folder`."""
    folder.mkdir(parents=True)
    path = folder / "spec.json"
    path.write_text(json.dumps({**reference.spec.to_dict(), "out": str(folder / "run")}, indent=2), encoding="utf-8")
    return path


def _env(**extra: str) -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": python_path, **extra}


def _losses(run_dir: Path, *, first: bool) -> dict[int, float]:
    """Each step's logged loss: the first value logged for it, or the last (after a resume)."""
    losses: dict[int, float] = {}
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("type") != "metric" or event.get("loss") is None:
            continue
        if not (first and event["step"] in losses):
            losses[event["step"]] = float(event["loss"])
    return losses


@pytest.fixture(scope="module")
def torchrun_losses(ray_cluster: LocalRayCluster, ddp_reference: ReferenceRun) -> dict[int, float]:
    """The same spec under torchrun on 2 processes of this machine (the engine tests' reference run).

    Asks for the cluster first, so that it starts while the reference runs (when no test ran it yet).
    """
    losses = _losses(ddp_reference.run_dir, first=False)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]
    return losses


def test_ray_run_survives_a_lost_worker_and_matches_torchrun_step_for_step(
    ray_cluster: LocalRayCluster,
    ddp_reference: ReferenceRun,
    torchrun_losses: dict[int, float],
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path / "job" / "attempt-1", ddp_reference)
    outcome = spec.parent / "outcome.json"
    command = [sys.executable, "-m", "tunedeck.engine.ray_launch", "--spec", str(spec), "--outcome", str(outcome)]
    command += ["--address", ray_cluster.address, "--workers", "2", "--max-failures", "1"]
    # Rank 1 is killed with its part of checkpoint-4 on disk but no marker: that checkpoint is never complete.
    env = _env(**ray_cluster.env, TUNEDECK_FAILPOINTS="engine_rank1_part_saved_step4",
               TUNEDECK_FAILPOINT_STATE=str(tmp_path / "failpoints"))  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    output = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, output
    assert json.loads(outcome.read_text()) == {"exit": 0}
    assert (tmp_path / "failpoints" / "engine_rank1_part_saved_step4").exists(), "the worker was never lost"

    run_dir = spec.parent / "run"
    # The rerun resumed from checkpoint-2, each rank from its own copy of the spec.
    for rank in (0, 1):
        resumed = json.loads((spec.parent / f"spec.resume-2.rank-{rank}.json").read_text())
        assert resumed["resume_from"] == str(run_dir / "checkpoints" / "checkpoint-2")
    for step in (2, 4, 6):
        assert missing_parts(run_dir / "checkpoints" / f"checkpoint-{step}", 2) == []
    assert (run_dir / "final").is_dir()
    assert json.loads((run_dir / "results.json").read_text())["global_step"] == 6
    assert (spec.parent / "ray").is_dir()  # Ray's own run state, in the attempt's folder

    first_logged, last_logged = _losses(run_dir, first=True), _losses(run_dir, first=False)
    assert sorted(first_logged) == sorted(last_logged) == [1, 2, 3, 4, 5, 6]
    for step, expected in torchrun_losses.items():
        assert first_logged[step] == pytest.approx(expected, abs=1e-5), f"step {step}, first logged"
        assert last_logged[step] == pytest.approx(expected, abs=1e-5), f"step {step}, last logged (after the resume)"
