"""Checkpoint rows: written on the worker's disk, then committed to storage, under the fencing token.

Order of the commit contract (the worker drives it):
1. `record_written(job, token, step, prefix)` when the engine reports a checkpoint;
2. `ArtifactStore.commit_directory(dir, prefix)`: files, then MANIFEST.json;
3. `mark_committed(job, token, step, manifest.digest)`.
Steps 1 and 3 change nothing once the worker's token is stale, so a worker
that lost its lease can never make its checkpoint the one a job resumes from.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from tunedeck.core.errors import NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.store.access import Actor, get_owned
from tunedeck.store.db import Database
from tunedeck.store.fencing import held_job
from tunedeck.store.models import Checkpoint, Job
from tunedeck.store.types import utcnow

WRITTEN = "written"
COMMITTED = "committed"


class CheckpointRepository:
    """Record, commit, find and prune a job's checkpoints."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record_written(
        self,
        job_id: str,
        token: str,
        step: int,
        storage_prefix: str,
        *,
        metrics: dict[str, Any] | None = None,
    ) -> bool:
        """Note the checkpoint at `step` is complete on disk; False (nothing stored) when the token is stale.

        Recording a step again (a retry after a crash) updates the written row;
        a committed row is never changed.
        """
        with self.db.write() as session:
            if held_job(session, job_id, token) is None:
                return False
            row = session.scalars(
                select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step == step)
            ).one_or_none()
            if row is None:
                session.add(
                    Checkpoint(
                        id=new_id("ckpt_"),
                        job_id=job_id,
                        step=step,
                        storage_prefix=storage_prefix,
                        state=WRITTEN,
                        metrics=metrics or {},
                        created_at=utcnow(),
                    )
                )
            elif row.state == WRITTEN:
                row.storage_prefix = storage_prefix
                row.metrics = metrics or row.metrics
        return True

    def mark_committed(
        self, job_id: str, token: str, step: int, manifest_sha256: str, *, is_best: bool = False
    ) -> bool:
        """Mark the checkpoint at `step` committed (its manifest is stored); False when the token is stale.

        `is_best` moves the job's best-checkpoint flag to this step. NotFoundError
        when the step was never recorded as written.
        """
        with self.db.write() as session:
            if held_job(session, job_id, token) is None:
                return False
            row = session.scalars(
                select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step == step).with_for_update()
            ).one_or_none()
            if row is None:
                raise NotFoundError(f"job {job_id!r} has no written checkpoint at step {step}")
            if is_best:
                session.execute(update(Checkpoint).where(Checkpoint.job_id == job_id).values(is_best=False))
                row.is_best = True
            if row.state != COMMITTED:
                row.state = COMMITTED
                row.manifest_sha256 = manifest_sha256
                row.committed_at = utcnow()
        return True

    def committed(self, job_id: str) -> list[Checkpoint]:
        """The job's committed checkpoints, newest first (try in order until a manifest verifies)."""
        with self.db.read() as session:
            return list(
                session.scalars(
                    select(Checkpoint)
                    .where(Checkpoint.job_id == job_id, Checkpoint.state == COMMITTED)
                    .order_by(Checkpoint.step.desc())
                )
            )

    def newest_committed_checkpoint(self, job_id: str) -> Checkpoint | None:
        """The committed checkpoint with the highest step, or None."""
        found = self.committed(job_id)
        return found[0] if found else None

    def list_for_job(self, actor: Actor, job_id: str) -> list[Checkpoint]:
        """Every checkpoint row of one of `actor`'s jobs, by step."""
        with self.db.read() as session:
            get_owned(session, Job, job_id, actor, "job")
            return list(
                session.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(Checkpoint.step))
            )

    def get(self, actor: Actor, job_id: str, step: int) -> Checkpoint:
        """One checkpoint of one of `actor`'s jobs; NotFoundError otherwise."""
        with self.db.read() as session:
            get_owned(session, Job, job_id, actor, "job")
            row = session.scalars(
                select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step == step)
            ).one_or_none()
        if row is None:
            raise NotFoundError(f"job {job_id!r} has no checkpoint at step {step}")
        return row

    def prune(self, job_id: str, token: str, keep: int) -> list[Checkpoint]:
        """Forget all but the newest `keep` committed checkpoints and the best; [] when the token is stale.

        Also forgets written-but-never-committed rows older than the newest
        committed step (left by a crash mid-upload). Returns the removed rows:
        the caller then deletes their storage prefixes. Rows go first, so a crash
        in between leaves unreferenced files, never a row pointing at nothing.
        """
        if keep < 1:
            raise ValueError("keep must be at least 1")
        with self.db.write() as session:
            if held_job(session, job_id, token) is None:
                return []
            rows = list(
                session.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(Checkpoint.step.desc()))
            )
            committed = [r for r in rows if r.state == COMMITTED]
            kept = {r.id for r in committed[:keep]} | {r.id for r in committed if r.is_best}
            newest_step = committed[0].step if committed else None
            removed = [
                r
                for r in rows
                if (r.state == COMMITTED and r.id not in kept)
                or (r.state == WRITTEN and newest_step is not None and r.step < newest_step)
            ]
            for row in removed:
                session.delete(row)
        return removed
