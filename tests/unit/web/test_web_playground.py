"""The job page's playground: it asks `/v1/chat/completions` for the models by the names that route knows,
states the route's sampling limits, and the route takes the dashboard's session (with its CSRF header)."""

from __future__ import annotations

import re

from tests.fixtures.app import AppHarness, sign_in
from tests.fixtures.job_claims import claim_job
from tunedeck.api.schemas.common import SEED_MAX
from tunedeck.api.schemas.exports import MAX_NEW_TOKENS
from tunedeck.core.states import JobState
from tunedeck.store.train_policy import JobEnd

CHAT = "/v1/chat/completions"


def _succeeded_job(web: AppHarness, step: int) -> tuple[str, str]:
    """Alice's succeeded job on a base model of hers, with a checkpoint committed at `step`; (job id, base id)."""
    base = web.store.base_models.register(web.users["alice"], name="chat-base", local_path="/models/chat-base")
    job = web.store.jobs.enqueue(web.users["alice"], name="chat me", config={"epochs": 1}, base_model_id=base.id)
    claimed = claim_job(web.store, "w", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job.id
    web.store.checkpoints.record_written(job.id, claimed.fencing_token, step, f"users/x/ckpt-{step}")
    web.store.checkpoints.mark_committed(job.id, claimed.fencing_token, step, "0" * 64)
    web.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.SUCCEEDED))
    return job.id, base.id


def test_the_playground_names_the_models_as_the_chat_route_does(web: AppHarness) -> None:
    job_id, base_id = _succeeded_job(web, 3)
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job_id}").text
    select = re.search(r'<select id="playground-checkpoint".*?</select>', page, re.S)
    assert select is not None
    options = re.findall(r'<option value="([^"]*)" data-model="([^"]+)">([^<]+)</option>', select.group(0))
    assert options == [
        ("", f"ft:chat-base::{job_id}", "final model"),
        ("3", f"ft:chat-base::{job_id}:ckpt-step-3", "checkpoint 3"),
    ]
    assert f'data-chat-path="{CHAT}"' in page and f'data-base-model="{base_id}"' in page
    assert f'data-max-new-tokens="{MAX_NEW_TOKENS}"' in page and f'data-max-seed="{SEED_MAX}"' in page
    for label in ("System prompt", "Temperature", "Top-p", "Seed", "Max new tokens", "Message (a user turn)"):
        assert f">{label}" in page, label
    assert '<ol class="conversation" id="playground-tuned"' in page and 'id="playground-stop"' in page


def test_the_chat_route_takes_the_dashboard_session_with_its_csrf_header(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    body = {"model": "ft:chat-base::job_nobody", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    refused = web.client.post(CHAT, json=body)
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.text
    answered = web.client.post(CHAT, json=body, headers={"X-CSRF-Token": csrf})
    assert answered.status_code == 404 and answered.json()["error"]["code"] == "model_not_found"
