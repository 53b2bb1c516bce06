"""Each resume is on the job's timeline with the step it resumed from, beside the run's own events."""

from __future__ import annotations

from tests.fixtures.job_claims import claim_job
from tunedeck.core.states import JobState
from tunedeck.store.records import NewEvent
from tunedeck.store.resume_record import RESUME_EVENT
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd


def _commit_checkpoint(store: JobStore, job_id: str, token: str, step: int) -> None:
    assert store.checkpoints.record_written(job_id, token, step, f"jobs/{job_id}/checkpoint-{step}")
    assert store.checkpoints.mark_committed(job_id, token, step, "0" * 64)


def test_resumes_are_recorded_with_their_step_and_never_take_a_run_events_place(sqlite_url: str) -> None:
    store = JobStore.open(sqlite_url, migrate=False)
    try:
        alice = store.users.create_user("alice")
        job = store.jobs.enqueue(alice, name="resumed", config={})
        claimed = claim_job(store, "w1", devices=0, lease_s=60)
        assert claimed is not None
        run_events = [NewEvent(seq, "log", {"message": f"line {seq}"}) for seq in range(3)]
        store.telemetry.append_events(job.id, claimed.attempt, run_events)
        for step in (2, 4):
            _commit_checkpoint(store, job.id, claimed.fencing_token, step)
        store.jobs.request_pause(alice, job.id)
        assert store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.PAUSED))

        store.jobs.resume_from(alice, job.id, 2)
        store.jobs.request_cancel(alice, job.id)  # still queued: cancelled at once
        store.jobs.resume(alice, job.id)

        events = store.telemetry.list_events(alice, job.id, types=[RESUME_EVENT])
        assert [(e.payload["step"], e.payload["message"]) for e in events] == [
            (2, "resumed from step 2"),
            (2, "resumed from step 2"),
        ]
        assert all(e.seq < 0 and e.attempt == claimed.attempt for e in events)
        # Reading the attempt's events file again stores nothing twice and loses none of its lines.
        assert store.telemetry.append_events(job.id, claimed.attempt, run_events) == 0
        assert len(store.telemetry.list_events(alice, job.id, types=["log"])) == 3
    finally:
        store.close()
