"""Deleting from the dashboard: a confirmation listing the models a dataset trained, then the receipt page."""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.core.errors import NotFoundError


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_a_dataset_that_trained_a_model_is_deleted_with_it_only_when_asked(web: AppHarness) -> None:
    alice = web.users["alice"]
    dataset = web.store.datasets.create_dataset(alice, "chats")
    version = web.store.datasets.add_version(alice, dataset.id, sha256="a" * 64, format="jsonl", rows=1,
                                             storage_key=f"users/{alice.id}/datasets/dsu_x/data.jsonl")  # fmt: skip
    job = web.store.jobs.enqueue(alice, name="tuned on chats", config={"epochs": 1},
                                 train_dataset_version_id=version.id)  # fmt: skip
    sign_in(web.client, web.tokens["alice"])
    assert f'href="/deletions/confirm?kind=dataset&amp;target={dataset.id}"' in web.client.get(
        f"/datasets/{dataset.id}").text  # fmt: skip
    assert f'href="/deletions/confirm?kind=job&amp;target={job.id}"' in web.client.get(f"/jobs/{job.id}").text

    confirm = web.client.get(f"/deletions/confirm?kind=dataset&target={dataset.id}")
    assert confirm.status_code == 200 and "tuned on chats" in confirm.text and 'name="with_models"' in confirm.text
    form = {"csrf_token": _csrf(confirm.text), "kind": "dataset", "target": dataset.id}
    refused = web.client.post("/deletions", data=form, follow_redirects=False)
    assert refused.status_code == 409 and "tick the box" in refused.text
    assert web.store.datasets.get_dataset(alice, dataset.id).id == dataset.id

    done = web.client.post("/deletions", data={**form, "with_models": "1"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/deletions/del_")
    with pytest.raises(NotFoundError):
        web.store.datasets.get_dataset(alice, dataset.id)
    with pytest.raises(NotFoundError):
        web.store.jobs.get(alice, job.id)
    receipt_page = web.client.get(done.headers["location"])
    assert receipt_page.status_code == 200 and "dataset chats" in receipt_page.text and "pending" in receipt_page.text
    assert "dataset versions" in receipt_page.text  # the database lines are there before any worker ran

    sign_in(web.client, web.tokens["bob"])
    assert web.client.get(done.headers["location"]).status_code == 404
    assert web.client.get(f"/deletions/confirm?kind=dataset&target={dataset.id}").status_code == 404


def test_a_job_others_started_from_lists_them_before_it_is_deleted(web: AppHarness) -> None:
    alice = web.users["alice"]
    parent = web.store.jobs.enqueue(alice, name="sft", config={"epochs": 1})
    child = web.store.jobs.enqueue(
        alice, name="sft again", config={"init_from_job": parent.id, "init_from_checkpoint": 4}
    )
    for job in (parent, child):
        web.store.jobs.request_cancel(alice, job.id)
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{child.id}").text
    assert f'<dt>Started from</dt><dd><a href="/jobs/{parent.id}">{parent.id}</a> (checkpoint at step 4)' in page

    confirm = web.client.get(f"/deletions/confirm?kind=job&target={parent.id}")
    # The page's words are escaped as any text is (the apostrophe too): compare the text a reader sees.
    assert confirm.status_code == 200 and "Models started from this job's model" in unescape(confirm.text)
    assert "sft again" in confirm.text and 'name="with_models"' in confirm.text
    form = {"csrf_token": _csrf(confirm.text), "kind": "job", "target": parent.id}
    refused = web.client.post("/deletions", data=form, follow_redirects=False)
    assert refused.status_code == 409 and "tick the box" in refused.text
    done = web.client.post("/deletions", data={**form, "with_models": "1"}, follow_redirects=False)
    assert done.status_code == 303
    with pytest.raises(NotFoundError):
        web.store.jobs.get(alice, child.id)
