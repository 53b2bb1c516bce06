"""The full log: every line, searched and filtered by level with a count, and the whole log as a download."""

from __future__ import annotations

import re

from tests.fixtures.app import API, AppHarness, sign_in
from tunedeck.service.jobs import job_log
from tunedeck.service.jobs.job_log import highlighted
from tunedeck.store.records import NewEvent


def _log_events(count: int, start: int = 1) -> list[NewEvent]:
    events = []
    for seq in range(start, start + count):
        level = "warning" if seq % 10 == 0 else "info"
        message = f"step {seq} done" if seq % 10 else f"step {seq}: Loss spike"
        events.append(NewEvent(seq, "log", {"type": "log", "level": level, "message": message}))
    return events


def test_the_page_lists_every_line_and_searches_them(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="long run", config={})
    web.store.telemetry.append_events(job.id, 1, _log_events(95))
    web.store.telemetry.append_events(job.id, 1, [NewEvent(500, "metric", {"type": "metric", "loss": 1.0})])
    sign_in(web.client, web.tokens["alice"])
    assert 'href="/jobs/' + job.id + '/log"' in web.client.get(f"/jobs/{job.id}").text
    page = web.client.get(f"/jobs/{job.id}/log")
    assert page.status_code == 200
    assert "95 of 95 lines" in page.text
    assert len(re.findall(r'<li data-level="', page.text)) == 95
    found = web.client.get(f"/jobs/{job.id}/log", params={"q": "loss SPIKE"})
    assert "9 of 95 lines" in found.text
    assert found.text.count("<mark>Loss spike</mark>") == 9
    warnings = web.client.get(f"/jobs/{job.id}/log", params={"level": "warning", "q": "step 9"})
    assert "1 of 95 lines" in warnings.text and "<mark>step 9</mark>0: Loss spike" in warnings.text
    assert "No line matches" in web.client.get(f"/jobs/{job.id}/log", params={"q": "nothing like this"}).text


def test_the_download_streams_every_line_as_an_attachment(web: AppHarness, monkeypatch: object) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="long run", config={})
    web.store.telemetry.append_events(job.id, 1, _log_events(25))
    web.store.telemetry.append_events(
        job.id, 1, [NewEvent(99, "log", {"type": "log", "level": "error", "message": "two\nlines <b>"})]
    )
    monkeypatch.setattr(job_log, "BATCH", 4)  # type: ignore[attr-defined]  # several reads, in order
    answer = web.client.get(f"{API}/jobs/{job.id}/log.txt", headers=web.auth("alice"))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.headers["content-disposition"] == f'attachment; filename="job-{job.id}.log"'
    lines = answer.text.splitlines()
    assert len(lines) == 26
    assert lines[0].endswith(" info step 1 done") and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC ", lines[0])
    assert lines[-1].endswith(" error two\\nlines <b>")


def test_another_users_log_is_404(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["bob"], name="bobs", config={})
    web.store.telemetry.append_events(job.id, 1, _log_events(3))
    sign_in(web.client, web.tokens["alice"])
    assert web.client.get(f"/jobs/{job.id}/log").status_code == 404
    assert web.client.get(f"{API}/jobs/{job.id}/log.txt", headers=web.auth("alice")).status_code == 404
    assert web.client.get(f"{API}/jobs/{job.id}/log.txt", headers=web.auth("bob")).status_code == 200


def test_highlighting_cuts_around_every_match_in_any_case() -> None:
    assert highlighted("Loss rose; loss fell", "LOSS") == [
        ("Loss", True),
        (" rose; ", False),
        ("loss", True),
        (" fell", False),
    ]
    assert highlighted("nothing", "") == [("nothing", False)]
