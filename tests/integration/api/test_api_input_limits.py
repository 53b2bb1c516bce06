"""Out-of-range numbers, NUL bytes and pathological uploads answer a 4xx that names the field, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness

HUGE = 2**64  # above every integer column and every seed a random generator takes
HUGE_TEXT = str(HUGE)


def _requests(job_id: str, dataset_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("GET", f"/jobs/{job_id}/checkpoints/{HUGE_TEXT}", {}),
        ("GET", f"/jobs/{job_id}/checkpoints/{HUGE_TEXT}/archive", {}),
        ("GET", f"/jobs/{job_id}/checkpoints/{HUGE_TEXT}/files/config.json", {}),
        ("GET", f"/jobs/{job_id}/events", {"params": {"after": HUGE_TEXT}}),
        ("GET", f"/jobs/{job_id}/events/stream", {"params": {"after": HUGE_TEXT}}),
        ("GET", f"/jobs/{job_id}/metrics/loss", {"params": {"min_step": HUGE_TEXT}}),
        ("GET", f"/jobs/{job_id}/metrics/loss", {"params": {"max_step": HUGE_TEXT}}),
        ("POST", f"/jobs/{job_id}/resume", {"params": {"from_step": HUGE_TEXT}}),
        ("POST", f"/jobs/{job_id}/generate", {"json": {"prompt": "hi", "seed": HUGE}}),
        ("POST", f"/jobs/{job_id}/generate", {"json": {"prompt": "hi", "checkpoint": HUGE}}),
        ("POST", f"/jobs/{job_id}/exports", {"json": {"format": "adapter", "checkpoint": HUGE}}),
        ("GET", f"/datasets/{dataset_id}/preview", {"params": {"version": HUGE_TEXT}}),
        ("POST", f"/datasets/{dataset_id}/seal", {"params": {"version": HUGE_TEXT}}),
        ("POST", "/base-models", {"json": {"local_path": "/tmp/model\x00/x"}}),
        ("POST", "/base-models", {"json": {"name": "a\x00b", "hub_id": "org/model"}}),
    ]


def test_numbers_too_large_and_nul_bytes_are_refused_by_field(api: AppHarness) -> None:
    job = api.job("alice")
    dataset = api.dataset("alice", name="limits")
    for method, path, options in _requests(job["id"], dataset["id"]):
        answer = api.client.request(method, f"{API}{path}", headers=api.auth("alice"), **options)
        assert 400 <= answer.status_code < 500, (method, path, options, answer.status_code, answer.text)
        body = answer.json()
        assert body["detail"], (path, body)


@pytest.mark.parametrize(
    ("filename", "content", "what"),
    [
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
        ("digits.jsonl", b'{"prompt": "q", "completion": "a", "n": ' + b"9" * 100_000 + b"}\n", "number too long"),
        ("nested.jsonl", b'{"prompt": ' + b'{"a": ' * 200 + b"1" + b"}" * 200 + b', "completion": "a"}\n',
         "nested too deeply"),
        ("deep.json", b"[" + b"[" * 100_000 + b"]" * 100_000 + b"]", "nested too deeply"),
        ("digits.json", b'[{"prompt": "q", "completion": "a", "n": ' + b"9" * 100_000 + b"}]", "number too long"),
    ],
)
def test_pathological_uploads_are_refused_with_the_line(
    api: AppHarness, filename: str, content: bytes, what: str
) -> None:
    api.settings.max_upload_bytes = 1_000_000
    answer = api.upload("alice", content, filename=filename, name="evil")
    assert answer.status_code == 422, answer.text
    issues = answer.json()["issues"]
    assert issues and issues[0]["line"] == 1 and what in issues[0]["message"], issues
    listed = api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()
    assert [item["name"] for item in listed] == []  # nothing half-written
