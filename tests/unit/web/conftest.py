"""A dashboard app on a fresh SQLite database and local storage, with two users and a signed-in client."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tunedeck.api.app import create_app
from tunedeck.core.settings import Settings
from tunedeck.jobs.models import User
from tunedeck.jobs.store import JobStore

CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')
LOGIN_NONCE = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class WebApp:
    """The app under test and what the tests need to drive it."""

    client: TestClient
    store: JobStore
    alice: User
    alice_token: str
    bob: User
    bob_token: str


def sign_in(client: TestClient, token: str) -> str:
    """Sign `client` in with `token`; returns the session's CSRF token read from a page."""
    page = client.get("/login")
    nonce = LOGIN_NONCE.search(page.text)
    assert nonce is not None
    answer = client.post("/login", data={"token": token, "csrf_token": nonce.group(1)}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    jobs = client.get("/jobs")
    found = CSRF_META.search(jobs.text)
    assert found is not None and found.group(1)
    return found.group(1)


@pytest.fixture
def web(sqlite_url: str, tmp_path: Path) -> Iterator[WebApp]:
    """The full app (API + dashboard) with users alice and bob; the client is not signed in."""
    store = JobStore.open(sqlite_url, migrate=False)
    alice = store.users.create_user("alice")
    alice_token, _ = store.users.issue_token(alice)
    bob = store.users.create_user("bob")
    bob_token, _ = store.users.issue_token(bob)
    settings = Settings(data_dir=tmp_path / "data", database_url=sqlite_url)
    app = create_app(settings, job_store=store)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield WebApp(client, store, alice, alice_token, bob, bob_token)
    store.close()
