"""The compare-runs page: two to ten of the user's own jobs, their config differences, final metrics and curves."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.storage.base import job_prefix
from tunedeck.store.records import MetricPoint, NewEvent


def _compare_data(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="compare-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _diff_rows(html: str) -> dict[str, list[str]]:
    """The config difference table as {key: [group, value of each job...]}."""
    rows = {}
    for key, cells in re.findall(r'<tr data-key="([^"]+)">(.*?)</tr>', html, re.S):
        rows[key] = re.findall(r"<td>(.*?)</td>", cells)
    return rows


def test_compare_page_lists_only_the_keys_that_differ(web: AppHarness) -> None:
    alice = web.users["alice"]
    slow = web.store.jobs.enqueue(alice, name="lr small", config={"learning_rate": 1e-4, "epochs": 1})
    # lora_r written out at its default, and 2 x 8 examples per step as the default 4 x 4: neither is a difference.
    fast = web.store.jobs.enqueue(
        alice,
        name="lr large",
        config={"learning_rate": 5e-4, "epochs": 1, "lora_r": 16, "batch_size": 2, "gradient_accumulation_steps": 8},
    )
    third = web.store.jobs.enqueue(alice, name="lr large again", config={"learning_rate": 5e-4, "epochs": 2})
    web.store.telemetry.append_metrics(slow.id, [MetricPoint("loss", s, 3.0 - s / 10) for s in range(1, 11)])
    web.store.telemetry.append_metrics(fast.id, [MetricPoint("loss", s, 2.0 - s / 10) for s in range(1, 11)])
    web.store.telemetry.append_metrics(fast.id, [MetricPoint("eval_loss", 10, 1.25), MetricPoint("epoch", 10, 1.0)])
    artifacts = web.client.app.state.tunedeck.artifacts  # type: ignore[attr-defined]
    final = {"metrics": {"accuracy": 0.75}, "procedure_sha256": "p" * 64}
    artifacts.put_bytes(f"{job_prefix(alice.id, fast.id)}/run/final_eval.json", json.dumps(final).encode())
    sign_in(web.client, web.tokens["alice"])

    page = web.client.get(f"/jobs/compare?ids={slow.id},{fast.id},{third.id}")
    assert page.status_code == 200, page.text
    rows = _diff_rows(page.text)
    assert rows["learning_rate"] == ["optimisation", "0.0001", "0.0005", "0.0005"]
    assert rows["epochs"] == ["budget", "1", "1", "2"]
    assert "effective_batch_size" not in rows
    assert "lora_r" not in rows and "batch_size" not in rows and "seed" not in rows
    # Final metrics: the last logged losses, then the final evaluation's, one column per job in order.
    final_table = page.text[page.text.index('id="final-metrics"') :]
    assert "loss (last logged)" in final_table and "accuracy (final evaluation)" in final_table
    assert "eval_loss (last logged)" in final_table
    data = _compare_data(page.text)
    assert [job["name"] for job in data["jobs"]] == ["lr small", "lr large", "lr large again"]  # type: ignore[attr-defined,index]
    assert data["metrics"] == ["loss", "eval_loss"]  # charted; the epoch series is the x-axis choice
    assert 'id="chart-metric-1"' in page.text and 'id="chart-metric-2"' in page.text


def test_the_same_effective_batch_is_no_difference(web: AppHarness) -> None:
    alice = web.users["alice"]
    first = web.store.jobs.enqueue(
        alice, name="four by four", config={"batch_size": 4, "gradient_accumulation_steps": 4}
    )
    second = web.store.jobs.enqueue(
        alice, name="two by eight", config={"batch_size": 2, "gradient_accumulation_steps": 8}
    )
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/compare?ids={first.id}&ids={second.id}")  # the jobs list's form repeats ids
    assert page.status_code == 200, page.text
    assert _diff_rows(page.text) == {}
    assert "These jobs train with the same effective config." in page.text


def test_compare_refuses_fewer_than_two_or_more_than_ten_jobs(web: AppHarness) -> None:
    jobs = [web.store.jobs.enqueue(web.users["alice"], name=f"run {i}", config={}) for i in range(11)]
    sign_in(web.client, web.tokens["alice"])
    one = web.client.get(f"/jobs/compare?ids={jobs[0].id}")
    assert one.status_code == 422
    assert "choose between 2 and 10 jobs to compare (got 1)" in one.text
    eleven = web.client.get("/jobs/compare?ids=" + ",".join(job.id for job in jobs))
    assert eleven.status_code == 422
    assert "(got 11)" in eleven.text
    assert web.client.get("/jobs/compare").status_code == 422
    # The same id twice is one job.
    assert web.client.get(f"/jobs/compare?ids={jobs[0].id},{jobs[0].id}").status_code == 422
    ten = web.client.get("/jobs/compare?ids=" + ",".join(job.id for job in jobs[:10]))
    assert ten.status_code == 200


def test_another_users_job_in_a_comparison_is_404(web: AppHarness) -> None:
    mine = web.store.jobs.enqueue(web.users["alice"], name="mine", config={})
    theirs = web.store.jobs.enqueue(web.users["bob"], name="bobs secret run", config={})
    sign_in(web.client, web.tokens["alice"])
    answer = web.client.get(f"/jobs/compare?ids={mine.id},{theirs.id}")
    assert answer.status_code == 404
    assert "bobs secret run" not in answer.text
    assert web.client.get(f"/jobs/compare?ids={mine.id},job_does_not_exist").status_code == 404
    assert web.client.get(f"/jobs/{theirs.id}/step-times").status_code == 404


def test_step_times_place_each_logged_step_in_time(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="timed", config={})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = [
        NewEvent(
            seq=i,
            type="metric",
            payload={"type": "metric", "step": i, "loss": 1.0},
            time=start + timedelta(seconds=10 * i),
        )
        for i in range(1, 6)
    ]
    web.store.telemetry.append_events(job.id, 1, [*events, NewEvent(seq=9, type="log", payload={"message": "hi"})])
    sign_in(web.client, web.tokens["alice"])
    answer = web.client.get(f"/jobs/{job.id}/step-times")
    assert answer.status_code == 200
    points = answer.json()["points"]
    assert [step for step, _ in points] == [1, 2, 3, 4, 5]
    assert points[-1][1] - points[0][1] == 40.0
    assert points[0][1] == (start + timedelta(seconds=10)).timestamp()


def test_step_times_are_read_from_at_most_the_points_asked(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["alice"], name="long", config={})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = [
        NewEvent(seq=i, type="metric", payload={"step": i}, time=start + timedelta(seconds=i)) for i in range(1, 101)
    ]
    web.store.telemetry.append_events(job.id, 1, events)
    times = web.store.telemetry.step_times(web.users["alice"], job.id, max_points=10)
    assert len(times) == 10
    assert times[0][0] == 1 and times[-1][0] == 100  # the first and the newest steps are always there


def test_jobs_list_offers_compare_and_the_experiment_page_links_to_it(web: AppHarness) -> None:
    alice = web.users["alice"]
    experiment = web.store.experiments.create(alice, name="lr", hypothesis="lower is better", reference_config={})
    jobs = [
        web.store.jobs.enqueue(
            alice, name=f"variant {i}", config={"learning_rate": 1e-4 * (i + 1)}, experiment_id=experiment.id
        )
        for i in range(2)
    ]
    sign_in(web.client, web.tokens["alice"])
    listed = web.client.get("/jobs").text
    assert 'id="compare-form"' in listed and 'id="compare-selected"' in listed
    for job in jobs:
        assert f'id="compare-{job.id}"' in listed and f'aria-label="Compare {job.name}"' in listed
    shown = web.client.get(f"/experiments/{experiment.id}").text
    link = re.search(r'id="compare-variants" href="([^"]+)"', shown)
    assert link is not None
    answer = web.client.get(link.group(1).replace("&amp;", "&"))
    assert answer.status_code == 200
    assert all(job.name in answer.text for job in jobs)
