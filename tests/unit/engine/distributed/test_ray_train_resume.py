"""Where a restarted group of processes goes on from: the newest checkpoint every rank finished, and any retry."""

from __future__ import annotations

import json
from pathlib import Path

from tunedeck.core.checkpoint_parts import mark_part_written
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.group_restart import (
    is_complete_checkpoint,
    newest_complete_checkpoint,
    record_oom_restart,
    resume_decision,
    write_rank_spec,
)
from tunedeck.engine.distributed.ranks import Ranks


def _checkpoint(run_dir: RunDir, step: int, ranks_done: tuple[int, ...], world_size: int = 2) -> Path:
    folder = run_dir.checkpoint(step)
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    for rank in ranks_done:
        mark_part_written(folder, rank, world_size)
    return folder


def _started_run(tmp_path: Path) -> RunDir:
    run_dir = RunDir(tmp_path / "run")
    run_dir.root.mkdir()
    run_dir.config.write_text("{}")
    return run_dir


def test_a_checkpoint_is_complete_with_every_rank_marker(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    assert is_complete_checkpoint(_checkpoint(run_dir, 2, (0, 1)))
    assert not is_complete_checkpoint(_checkpoint(run_dir, 4, (0,)))
    unfinished = run_dir.checkpoint(6)
    unfinished.mkdir()
    mark_part_written(unfinished, 0, 2)
    mark_part_written(unfinished, 1, 2)
    assert not is_complete_checkpoint(unfinished)  # the trainer never wrote its state
    assert newest_complete_checkpoint(run_dir) == run_dir.checkpoint(2)


def test_a_rerun_resumes_from_the_newest_complete_checkpoint_and_drops_later_parts(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    _checkpoint(run_dir, 2, (0, 1))
    _checkpoint(run_dir, 4, (0, 1))
    _checkpoint(run_dir, 6, (1,))  # rank 0 died while saving
    decision = resume_decision(run_dir, {"resume_from": None})
    assert decision == {"resume_from": str(run_dir.checkpoint(4))}
    assert [step for step, _ in run_dir.list_checkpoints()] == [2, 4]


def test_the_first_try_keeps_the_spec(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run")  # not made yet
    assert resume_decision(run_dir, {"resume_from": "/committed/checkpoint-40"}) == {
        "resume_from": "/committed/checkpoint-40"
    }
    assert resume_decision(run_dir, {}) == {"resume_from": None}


def test_a_rerun_without_any_complete_checkpoint(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    _checkpoint(run_dir, 2, (0,))
    # A job that had resumed from a committed checkpoint resumes from it again.
    assert resume_decision(run_dir, {"resume_from": "/committed/checkpoint-40"}) == {
        "resume_from": "/committed/checkpoint-40"
    }
    # A new run lost before its first checkpoint has nothing to resume: the job goes back to the queue.
    assert resume_decision(run_dir, {"resume_from": None}) == {"lost_before_checkpoint": True}
    assert run_dir.list_checkpoints() == []


def test_each_rank_writes_its_own_resumed_spec(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.json"
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-4"
    spec = {"out": str(tmp_path / "run"), "resume_from": str(checkpoint)}
    path = write_rank_spec(spec_path, spec, Ranks(rank=1, local_rank=1, world_size=2, local_world_size=2))
    assert path.name == "spec.resume-4.rank-1.json"
    assert json.loads(path.read_text()) == spec
    retried = {**spec, "oom_restart": {"micro_batch": 2, "accumulation": 4, "attempts": []}}
    path = write_rank_spec(spec_path, retried, Ranks(rank=0, local_rank=0, world_size=2, local_world_size=2))
    assert path.name == "spec.resume-4.micro-2.rank-0.json"


def test_an_out_of_memory_retry_restarts_from_the_newest_complete_checkpoint_once(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    _checkpoint(run_dir, 2, (0, 1))
    _checkpoint(run_dir, 4, (0,))  # the try that ran out of memory died while saving
    attempts = [{"micro_batch": 4, "accumulation": 1, "outcome": "oom", "step": 3}]
    record_oom_restart(run_dir, 2, 2, attempts)
    retry = {"micro_batch": 2, "accumulation": 2, "attempts": attempts}
    # One machine (torchrun) does not rerun a crash, but does apply the retry a process asked for.
    assert resume_decision(run_dir, {}, rerun_lost_group=False) == {
        "resume_from": str(run_dir.checkpoint(2)), "oom_restart": retry,
    }  # fmt: skip
    assert [step for step, _ in run_dir.list_checkpoints()] == [2]
    # Applied once: the next restart nobody asked for ends the run.
    assert resume_decision(run_dir, {}, rerun_lost_group=False) == {"failed_with": "crash"}


def test_an_out_of_memory_retry_before_any_checkpoint_starts_over_in_the_run_directory(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    record_oom_restart(run_dir, 1, 8, [])
    assert resume_decision(run_dir, {"resume_from": None}) == {
        "resume_from": None, "oom_restart": {"micro_batch": 1, "accumulation": 8, "attempts": []},
    }  # fmt: skip
    # A job that had resumed from a committed checkpoint restarts from it.
    record_oom_restart(run_dir, 1, 8, [])
    decision = resume_decision(run_dir, {"resume_from": "/committed/checkpoint-40"}, rerun_lost_group=False)
    assert decision["resume_from"] == "/committed/checkpoint-40"


def _events(run_dir: RunDir, *kinds: str) -> None:
    lines = [json.dumps({"type": "diagnosis", "kind": kind, "message": kind}) for kind in kinds]
    run_dir.events.write_text("".join(f"{line}\n" for line in lines))


def test_a_rerun_does_not_repeat_a_failure_of_the_training_itself(tmp_path: Path) -> None:
    run_dir = _started_run(tmp_path)
    _checkpoint(run_dir, 2, (0, 1))
    outcome = tmp_path / "outcome.json"
    outcome.write_text(json.dumps({"exit": 1}))
    _events(run_dir, "slow", "oom", "slow")
    assert resume_decision(run_dir, {}, outcome) == {"failed_with": "oom"}
    # A peer lost in a collective is what the restart is for.
    _events(run_dir, "nan_loss", "error")
    assert resume_decision(run_dir, {}, outcome) == {"resume_from": str(run_dir.checkpoint(2))}
    # Rank 0 never wrote an outcome: it was lost with its group.
    _events(run_dir, "oom")
    outcome.unlink()
    assert resume_decision(run_dir, {}, outcome) == {"resume_from": str(run_dir.checkpoint(2))}
