"""The dashboard shows a user's quotas and use, why a queued job waits, and a resume a quota refuses."""

from __future__ import annotations

import re

from tests.fixtures.app import API, AppHarness, sign_in
from tests.fixtures.job_claims import claim_job


def _cells(page: str, row: str) -> list[str]:
    found = re.search(rf'<th scope="row">{row}[^<]*</th>(.*?)</tr>', page, re.S)
    assert found is not None, row
    return re.findall(r"<td>([^<]*)</td>", found.group(1))


def test_the_account_page_shows_each_limit_and_its_use(web: AppHarness) -> None:
    web.client.patch(
        f"{API}/users/alice/quota",
        headers=web.auth("root"),
        json={"running_jobs": 2, "storage_bytes": 5_000_000_000, "period_days": 7},
    )
    web.job("alice", name="waiting")
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/account").text
    assert _cells(page, "Running jobs") == ["0", "2"]
    assert _cells(page, "Queued jobs") == ["1", "no limit"]
    stored, allowed = _cells(page, "Storage")
    assert stored.endswith(" kB") and allowed == "5.0 GB"
    assert _cells(page, "Device-hours, last 7 days") == ["0.00", "no limit"]


def test_a_queued_job_page_says_which_quota_it_waits_on_and_a_refused_resume_says_why(web: AppHarness) -> None:
    web.client.patch(f"{API}/users/alice/quota", headers=web.auth("root"), json={"running_jobs": 1})
    first = web.job("alice", name="first")
    second = web.job("alice", name="second")
    assert claim_job(web.store, "w", devices=0, lease_s=60) is not None
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{second['id']}").text
    assert 'id="job-waiting"' in page and "running jobs: 1 of 1 in use" in page
    assert 'id="job-waiting"' not in web.client.get(f"/jobs/{first['id']}").text
    cancelled = web.client.post(f"/jobs/{second['id']}/cancel", data={"csrf_token": csrf}, follow_redirects=False)
    assert cancelled.status_code == 303
    web.client.patch(f"{API}/users/alice/quota", headers=web.auth("root"), json={"queued_jobs": 0})
    resumed = web.client.post(f"/jobs/{second['id']}/resume", data={"csrf_token": csrf}, follow_redirects=False)
    assert resumed.headers["location"] == f"/jobs/{second['id']}?notice=quota"
    shown = web.client.get(resumed.headers["location"]).text
    assert "One of your quotas does not allow another queued job now" in shown
    assert web.store.jobs.get(web.users["alice"], second["id"]).state == "cancelled"
