"""The job page's "Resume from here" on an earlier checkpoint rewinds the job and requeues it."""

from __future__ import annotations

import re

from tests.fixtures.app import AppHarness, sign_in
from tests.fixtures.job_claims import claim_job
from tunedeck.core.states import JobState
from tunedeck.store.train_policy import JobEnd


def test_resume_from_an_earlier_checkpoint(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="rewind me", config={"epochs": 1})
    claimed = claim_job(web.store, "w", devices=0, lease_s=60)
    assert claimed is not None
    for step in (3, 6):
        web.store.checkpoints.record_written(job.id, claimed.fencing_token, step, f"users/x/ckpt-{step}")
        web.store.checkpoints.mark_committed(job.id, claimed.fencing_token, step, "0" * 64)
    web.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.FAILED, error="out of memory"))

    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job.id}")
    assert page.status_code == 200
    assert sorted(re.findall(r'name="from_step" value="(\d+)"', page.text)) == ["3", "6"]
    form_token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert form_token is not None

    answer = web.client.post(
        f"/jobs/{job.id}/resume", data={"csrf_token": form_token.group(1), "from_step": "3"}, follow_redirects=False
    )
    assert answer.status_code == 303
    assert web.store.jobs.get(web.users["alice"], job.id).state == JobState.QUEUED.value
    assert [c.step for c in web.store.checkpoints.committed(job.id)] == [3]


def test_a_step_no_checkpoint_can_have_is_refused_and_nothing_changes(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="keep me", config={"epochs": 1})
    claimed = claim_job(web.store, "w", devices=0, lease_s=60)
    assert claimed is not None
    web.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.FAILED, error="stopped"))
    sign_in(web.client, web.tokens["alice"])
    form_token = re.search(r'name="csrf_token" value="([^"]+)"', web.client.get(f"/jobs/{job.id}").text)
    assert form_token is not None
    for step in (str(2**64), "-1", "three"):
        answer = web.client.post(
            f"/jobs/{job.id}/resume", data={"csrf_token": form_token.group(1), "from_step": step},
            follow_redirects=False,
        )
        assert answer.status_code == 303 and answer.headers["location"].endswith("?notice=bad_step"), step
        assert web.store.jobs.get(web.users["alice"], job.id).state == JobState.FAILED.value  # not resumed
    page = web.client.get(f"/jobs/{job.id}?notice=bad_step")
    assert "There is no checkpoint at that step to resume from." in page.text
