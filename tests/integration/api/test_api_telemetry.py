"""Events (list and server-sent stream) and downsampled metric series."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

from tests.fixtures.app import API, AppHarness
from tests.fixtures.job_claims import claim_job
from tests.waiting import HANG_S
from tunedeck.api.sse import SIGNED_OUT
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.train_policy import JobEnd


def _sse_messages(text: str) -> list[dict[str, str]]:
    messages = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            messages.append(fields)
    return messages


def test_event_list_pages_after_an_id(api: AppHarness) -> None:
    job = api.job("alice")
    events = [NewEvent(seq=i, type="metric" if i % 2 else "log", payload={"step": i}) for i in range(1, 7)]
    api.store.telemetry.append_events(job["id"], 1, events)
    url = f"{API}/jobs/{job['id']}/events"
    first = api.client.get(url, headers=api.auth("alice"), params={"limit": 4}).json()
    assert [e["seq"] for e in first] == [1, 2, 3, 4]
    rest = api.client.get(url, headers=api.auth("alice"), params={"after": first[-1]["id"]}).json()
    assert [e["seq"] for e in rest] == [5, 6]
    logs = api.client.get(url, headers=api.auth("alice"), params={"type": "log"}).json()
    assert [e["data"]["step"] for e in logs] == [2, 4, 6]


def test_stream_of_a_terminal_job_sends_everything_then_ends(api: AppHarness) -> None:
    job = api.job("alice")
    api.store.telemetry.append_events(
        job["id"], 1, [NewEvent(seq=i, type="log", payload={"message": f"m{i}"}) for i in range(1, 4)]
    )
    api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=api.auth("alice"))
    started = time.monotonic()
    with api.client.stream("GET", f"{API}/jobs/{job['id']}/events/stream", headers=api.auth("alice")) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    assert time.monotonic() - started < HANG_S  # it ended by itself (the bound only catches a hang)
    messages = _sse_messages(text)
    assert [m["event"] for m in messages] == ["log", "log", "log", "end"]
    assert [json.loads(m["data"])["data"]["message"] for m in messages[:3]] == ["m1", "m2", "m3"]
    # Resuming with Last-Event-ID sends only what came after.
    headers = {**api.auth("alice"), "Last-Event-ID": messages[1]["id"]}
    with api.client.stream("GET", f"{API}/jobs/{job['id']}/events/stream", headers=headers) as response:
        resumed = _sse_messages("".join(response.iter_text()))
    assert [m.get("id") for m in resumed] == [messages[2]["id"], None]


def test_stream_follows_a_running_job_until_it_finishes(api: AppHarness) -> None:
    job = api.job("alice")
    claimed = claim_job(api.store, "w", devices=0, lease_s=60)
    assert claimed is not None

    def worker() -> None:
        time.sleep(0.3)
        api.store.telemetry.append_events(job["id"], 1, [NewEvent(seq=1, type="phase", payload={"name": "training"})])
        time.sleep(0.2)
        api.store.telemetry.append_events(job["id"], 1, [NewEvent(seq=2, type="result", payload={"ok": True})])
        api.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"))

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        with api.client.stream("GET", f"{API}/jobs/{job['id']}/events/stream", headers=api.auth("alice")) as response:
            messages = _sse_messages("".join(response.iter_text()))
    finally:
        thread.join()
    assert [m["event"] for m in messages] == ["phase", "result", "end"]


def test_metric_series_is_downsampled_keeping_both_ends(api: AppHarness) -> None:
    job = api.job("alice")
    points = [MetricPoint(name="loss", step=s, value=10.0 / (s + 1)) for s in range(500)]
    points.append(MetricPoint(name="grad_norm", step=3, value=math.nan))
    api.store.telemetry.append_metrics(job["id"], points)
    base = f"{API}/jobs/{job['id']}/metrics"
    assert api.client.get(base, headers=api.auth("alice")).json()["names"] == ["grad_norm", "loss"]
    series = api.client.get(f"{base}/loss", headers=api.auth("alice"), params={"points": 50}).json()
    steps = [p["step"] for p in series["points"]]
    assert len(steps) == 50 and steps[0] == 0 and steps[-1] == 499 and steps == sorted(steps)
    full = api.client.get(f"{base}/loss", headers=api.auth("alice")).json()
    assert len(full["points"]) == 500
    nan = api.client.get(f"{base}/grad_norm", headers=api.auth("alice")).json()
    assert nan["points"] == [{"step": 3, "value": None}]
    assert api.client.get(f"{base}/loss", headers=api.auth("alice"), params={"points": 1}).status_code == 422


def _stream_until_signed_out(api: AppHarness, user: str, headers: dict[str, str], sign_out: Any) -> list[dict]:
    """Stream a queued job (it never ends by itself) while `sign_out` runs 0.3 s in; the messages received."""
    api.client.app.state.tunedeck.stream_recheck_seconds = 0.1  # type: ignore[attr-defined]
    job = api.job(user)
    thread = threading.Timer(0.3, sign_out)
    thread.start()
    started = time.monotonic()
    try:
        with api.client.stream("GET", f"{API}/jobs/{job['id']}/events/stream", headers=headers) as response:
            assert response.status_code == 200
            messages = _sse_messages("".join(response.iter_text()))
    finally:
        thread.join()
    assert time.monotonic() - started < HANG_S  # it ended by itself (the bound only catches a hang)
    return messages


def test_an_open_stream_ends_when_its_token_is_revoked(api: AppHarness) -> None:
    alice = api.store.users.get_user_by_name("alice")
    token, row = api.store.users.issue_token(alice, name="stream")
    headers = {"Authorization": f"Bearer {token}"}
    messages = _stream_until_signed_out(api, "alice", headers, lambda: api.store.users.revoke_token(alice, row.id))
    assert messages[-1]["event"] == "end" and json.loads(messages[-1]["data"])["reason"] == SIGNED_OUT
    assert api.client.get(f"{API}/me", headers=headers).status_code == 401


def test_an_open_stream_ends_when_its_user_is_disabled(api: AppHarness) -> None:
    messages = _stream_until_signed_out(
        api, "bob", api.auth("bob"), lambda: api.store.users.set_disabled("bob", True)
    )
    assert [m["event"] for m in messages] == ["end"]
    assert json.loads(messages[-1]["data"])["reason"] == SIGNED_OUT
