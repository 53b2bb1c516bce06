"""The dashboard's retention page and forms, and the deletion dates on the dataset and job pages."""

from __future__ import annotations

from tests.fixtures.app import API, AppHarness, sign_in


def test_the_retention_page_saves_a_policy_and_refuses_one_out_of_bounds_saying_why(web: AppHarness) -> None:
    web.settings.retention_max_days = 400
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/account/retention").text
    assert 'id="retention-bounds"' in page and "400 days" in page

    refused = web.client.post("/account/retention", data={"csrf_token": csrf, "job_days": "500"})
    assert refused.status_code == 422
    assert "job_days: 500 days is above the longest retention this server allows (400 days)" in refused.text
    malformed = web.client.post("/account/retention", data={"csrf_token": csrf, "job_days": "soon"})
    assert malformed.status_code == 422 and "expected a whole number of days" in malformed.text
    saved = web.client.post(
        "/account/retention", data={"csrf_token": csrf, "raw_data_days": "30", "job_days": ""}, follow_redirects=False
    )
    assert saved.status_code == 303
    assert web.client.get(f"{API}/retention", headers=web.auth("alice")).json()["raw_data_days"] == 30
    assert web.client.post("/account/retention", data={"raw_data_days": "30"}).status_code == 403  # no CSRF token


def test_the_dataset_and_job_pages_say_when_things_are_deleted(web: AppHarness) -> None:
    job = web.job("alice", name="tuned")
    dataset_id = web.store.datasets.get_version(web.users["alice"], job["train_dataset_version_id"]).dataset_id
    csrf = sign_in(web.client, web.tokens["alice"])
    before = web.client.get(f"/datasets/{dataset_id}").text
    assert "Raw data: kept until you delete it." in before

    saved = web.client.post(
        f"/datasets/{dataset_id}/retention", data={"csrf_token": csrf, "raw_data_days": "30"}, follow_redirects=False
    )
    assert saved.headers["location"] == f"/datasets/{dataset_id}?retention=saved"
    after = web.client.get(saved.headers["location"]).text
    assert "Raw data will be deleted 30 days after its last use (this dataset&#39;s policy)." in after  # job queued
    assert "This dataset&#39;s retention policy was saved." in after

    web.client.post(f"{API}/jobs/{job['id']}/cancel", headers=web.auth("alice"))
    web.client.put(f"{API}/retention", headers=web.auth("alice"), json={"job_days": 10})
    job_page = web.client.get(f"/jobs/{job['id']}").text
    assert "This job will be deleted on " in job_page and ", 10 days after it finished (your policy)." in job_page
    dated = web.client.get(f"/datasets/{dataset_id}").text
    assert "Raw data will be deleted on " in dated
    bob_csrf = sign_in(web.client, web.tokens["bob"])
    assert web.client.post(f"/datasets/{dataset_id}/retention", data={"csrf_token": bob_csrf}).status_code == 404
