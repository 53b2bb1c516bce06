"""`POST /hub-datasets`: a worker fetches a hub dataset split (here from a local git mirror), pinned to its commit."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.app import API, HANG_S, AppHarness, uploaded_id
from tests.fixtures.data import CHAT_ROWS, write_jsonl
from tunedeck.data.hub import MIRROR_ENV


def _mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, script: bool = False) -> str:
    repo = tmp_path / "mirror" / "acme" / "tiny-chat"
    write_jsonl(repo / "train.jsonl", CHAT_ROWS)
    if script:
        (repo / "tiny-chat.py").write_text("raise SystemExit('never run')\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "data"], check=True)
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "mirror"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def _register(api: AppHarness, body: dict[str, Any]) -> Any:
    return api.while_working(
        ("ingest",),
        lambda: api.client.post(f"{API}/hub-datasets", params={"wait": HANG_S}, headers=api.auth("alice"), json=body),
    )


def test_a_hub_split_is_registered_pinned_to_its_commit(
    api: AppHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = _mirror(tmp_path, monkeypatch)
    answer = _register(api, {"hub": "acme/tiny-chat", "split": "train"})
    dataset_id = uploaded_id(answer)
    assert answer.json()["result"]["name"] == "tiny-chat" and answer.json()["result"]["rows"] == len(CHAT_ROWS)
    version = api.store.datasets.list_versions(api.users["alice"], dataset_id)[-1]
    assert version.kind == "chat"
    assert version.manifest is not None
    assert version.manifest["notes"]["hub"] == {
        "id": "acme/tiny-chat", "split": "train", "subset": None, "revision": None, "commit": commit,
    }
    assert version.manifest["notes"]["source"] == "hub:acme/tiny-chat"


def test_bad_hub_requests_are_refused(api: AppHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mirror(tmp_path, monkeypatch, script=True)
    bad_id = api.client.post(f"{API}/hub-datasets", headers=api.auth("alice"), json={"hub": "../x", "split": "train"})
    assert bad_id.status_code == 422
    scripted = _register(api, {"hub": "acme/tiny-chat", "split": "train"})
    assert scripted.status_code == 422, scripted.text
    assert "loading script" in scripted.text
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json() == []
