"""The jobs list: sortable headers, filters kept in the URL, durations, tags; the job page's tag form."""

from __future__ import annotations

import re
from datetime import timedelta

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.store.models import Job
from tunedeck.store.types import utcnow


def _row_names(html: str) -> list[str]:
    # The first link of each row is the job's name (a row may start with other cells, e.g. a checkbox).
    return re.findall(r'<tr data-job-id="[^"]+">.*?<a href="/jobs/[^"]+">([^<]+)</a>', html, re.S)


def test_headers_sort_the_list_and_say_how(web: AppHarness) -> None:
    alice = web.users["alice"]
    for name in ("bravo", "alpha", "charlie"):
        web.store.jobs.enqueue(alice, name=name, config={})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs")
    assert _row_names(page.text) == ["charlie", "alpha", "bravo"]  # newest first
    assert re.search(
        r'<th scope="col" aria-sort="descending" data-sort="created"><a href="/jobs\?sort=created&amp;order=asc"',
        page.text,
    )
    name_link = re.search(r'data-sort="name"><a href="([^"]+)"', page.text)
    assert name_link is not None
    by_name = web.client.get(name_link.group(1).replace("&amp;", "&"))
    assert _row_names(by_name.text) == ["alpha", "bravo", "charlie"]
    assert 'aria-sort="ascending" data-sort="name"' in by_name.text
    assert _row_names(web.client.get("/jobs?sort=name&order=desc").text) == ["charlie", "bravo", "alpha"]


def test_filters_stay_in_the_sort_links_and_narrow_the_list(web: AppHarness) -> None:
    alice = web.users["alice"]
    tagged = web.store.jobs.enqueue(alice, name="tagged run", config={}, tags=["sweep"])
    web.store.jobs.enqueue(alice, name="plain run", config={})
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs?tag=sweep&state=queued&name=run")
    assert _row_names(page.text) == ["tagged run"]
    assert '<option value="sweep" selected>sweep</option>' in page.text
    links = re.findall(r'data-sort="\w+"><a href="([^"]+)"', page.text)
    assert links and all("tag=sweep" in link and "state=queued" in link and "name=run" in link for link in links)
    assert '<span class="tag">sweep</span>' in page.text
    assert web.store.jobs.get(alice, tagged.id).tags == ["sweep"]
    form = re.search(r'<form method="get" action="/jobs"[^>]*>(.*?)</form>', page.text, re.S)
    assert form is not None
    for control in ('name="state"', 'name="name"', 'name="dataset"', 'name="base_model"', 'name="tag"'):
        assert control in form.group(1)
    assert web.client.get("/jobs?sort=colour").status_code in (400, 422)


def test_duration_column_shows_finished_and_running_jobs(web: AppHarness) -> None:
    alice = web.users["alice"]
    done = web.store.jobs.enqueue(alice, name="done", config={})
    running = web.store.jobs.enqueue(alice, name="running", config={})
    paused = web.store.jobs.enqueue(alice, name="paused", config={})
    now = utcnow()
    with web.store.db.write() as session:
        finished, live, stopped = (session.get(Job, job.id) for job in (done, running, paused))
        assert finished is not None and live is not None and stopped is not None
        finished.started_at, finished.finished_at = now - timedelta(minutes=70), now - timedelta(minutes=5)
        live.started_at, live.state = now - timedelta(seconds=90), "running"
        # Paused two hours ago after ten minutes of training: its time stopped when it paused.
        stopped.started_at, stopped.updated_at, stopped.state = (
            now - timedelta(hours=2, minutes=10),
            now - timedelta(hours=2),
            "paused",
        )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/jobs?sort=duration")
    assert _row_names(page.text) == ["done", "paused", "running"]
    cells = re.findall(r'<td class="duration">(.*?)</td>', page.text, re.S)
    assert cells[0] == "1h 05m"
    assert cells[1] == "10m 00s"
    assert cells[2].startswith("1m 3") and "so far" in cells[2]


def test_job_page_tag_form_saves_tags_and_refuses_bad_ones(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="tag me", config={})
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{job.id}")
    assert f'action="/jobs/{job.id}/tags"' in page.text
    saved = web.client.post(f"/jobs/{job.id}/tags", data={"csrf_token": csrf, "tags": "lr-high, sweep.2"})
    assert saved.status_code == 200 and "Tags saved." in saved.text
    assert 'value="lr-high, sweep.2"' in saved.text
    refused = web.client.post(f"/jobs/{job.id}/tags", data={"csrf_token": csrf, "tags": "ok, not/ok"})
    assert "Tags not saved" in refused.text
    assert web.store.jobs.get(web.users["alice"], job.id).tags == ["lr-high", "sweep.2"]
    no_csrf = web.client.post(f"/jobs/{job.id}/tags", data={"tags": "x"}, follow_redirects=False)
    assert no_csrf.status_code in (400, 403)


def test_another_users_job_tags_form_is_404(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["bob"], name="bobs", config={}, tags=["keep"])
    csrf = sign_in(web.client, web.tokens["alice"])
    answer = web.client.post(f"/jobs/{job.id}/tags", data={"csrf_token": csrf, "tags": "mine"}, follow_redirects=False)
    assert answer.status_code == 404
    assert web.store.jobs.get(web.users["bob"], job.id).tags == ["keep"]
    assert "keep" not in web.client.get("/jobs").text
