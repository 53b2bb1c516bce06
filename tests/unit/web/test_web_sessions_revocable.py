"""Sessions live on the server: logout, token revocation and disabling a user end them, replayed cookies too."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.fixtures.app import API, AppHarness, sign_in
from tunedeck.cli.main import app
from tunedeck.web.session import COOKIE_NAME


def _replay(web: AppHarness, cookie: str) -> TestClient:
    """A second browser holding a copy of the cookie."""
    other = TestClient(web.client.app, base_url="http://127.0.0.1")
    other.cookies.set(COOKIE_NAME, cookie)
    return other


def test_a_cookie_copied_before_logout_no_longer_signs_in(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    stolen = web.client.cookies[COOKIE_NAME]
    copy = _replay(web, stolen)
    assert copy.get(f"{API}/me").status_code == 200  # the copy works while the session lasts
    assert web.client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert copy.get(f"{API}/me").status_code == 401
    assert copy.get("/jobs", follow_redirects=False).status_code == 303  # back to the login page
    minted = copy.post(f"{API}/me/tokens", headers={"X-CSRF-Token": csrf})
    assert minted.status_code == 401  # and it cannot mint a permanent token any more


def test_revoking_the_token_ends_it_and_the_sessions_it_opened(web: AppHarness) -> None:
    plain, row = web.store.users.issue_token(web.users["alice"], "laptop")
    sign_in(web.client, plain)
    listed = web.client.get(f"{API}/me/tokens", headers=web.auth("alice")).json()
    assert {"laptop"} <= {t["name"] for t in listed} and all("tdk_" not in str(t) for t in listed)
    assert web.client.delete(f"{API}/me/tokens/{row.id}", headers=web.auth("bob")).status_code == 404  # not bob's
    assert web.client.delete(f"{API}/me/tokens/{row.id}", headers=web.auth("alice")).status_code == 204
    assert web.client.get(f"{API}/me", headers={"Authorization": f"Bearer {plain}"}).status_code == 401
    assert web.client.get(f"{API}/me").status_code == 401  # the cookie of that sign-in is gone too
    assert web.client.get(f"{API}/me", headers=web.auth("alice")).status_code == 200  # her other token still works


def test_disabling_a_user_stops_tokens_and_sessions_at_once(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["bob"])
    assert web.client.get(f"{API}/me").status_code == 200
    url = f"{API}/users/bob"
    assert web.client.patch(url, headers=web.auth("alice"), json={"disabled": True}).status_code == 403  # members
    disabled = web.client.patch(url, headers=web.auth("root"), json={"disabled": True})
    assert disabled.status_code == 200 and disabled.json()["disabled"] is True
    assert web.client.get(f"{API}/me").status_code == 401
    assert web.client.get(f"{API}/me", headers=web.auth("bob")).status_code == 401
    assert web.store.sessions.count_for(web.users["bob"]) == 0
    enabled = web.client.patch(url, headers=web.auth("root"), json={"disabled": False})
    assert enabled.json()["disabled"] is False
    assert web.client.get(f"{API}/me", headers=web.auth("bob")).status_code == 200  # tokens work again
    promoted = web.client.patch(url, headers=web.auth("root"), json={"role": "admin"})
    assert promoted.json()["role"] == "admin"
    itself = web.client.patch(f"{API}/users/root", headers=web.auth("root"), json={"disabled": True})
    assert itself.status_code == 409  # an admin cannot lock themselves out
    assert web.client.patch(f"{API}/users/nobody", headers=web.auth("root"), json={}).status_code == 404


def test_the_account_page_shows_a_new_token_once_and_revokes(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.post("/account/tokens", data={"csrf_token": csrf, "name": "ci runner"})
    assert page.status_code == 200
    shown = re.search(r'<code id="new-token">(tdk_[^<]+)</code>', page.text)
    assert shown is not None
    assert web.client.get(f"{API}/me", headers={"Authorization": f"Bearer {shown.group(1)}"}).status_code == 200
    again = web.client.get("/account")
    assert "ci runner" in again.text and shown.group(1) not in again.text  # never shown again
    token_id = re.search(r'data-token-id="([^"]+)"><td>ci runner', again.text)
    assert token_id is not None
    revoked = web.client.post(
        f"/account/tokens/{token_id.group(1)}/revoke", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert revoked.status_code == 303
    assert web.client.get(f"{API}/me", headers={"Authorization": f"Bearer {shown.group(1)}"}).status_code == 401
    bob_token = web.store.users.list_tokens(web.users["bob"])[0].id
    other = web.client.post(f"/account/tokens/{bob_token}/revoke", data={"csrf_token": csrf}, follow_redirects=False)
    assert other.status_code == 404 and web.store.users.list_tokens(web.users["bob"])  # bob's token untouched


def test_the_operator_lists_revokes_and_disables_from_the_command_line(web: AppHarness) -> None:
    url = web.settings.resolved_database_url()
    runner = CliRunner()
    listed = runner.invoke(app, ["users", "tokens", "bob", "--database-url", url])
    assert listed.exit_code == 0, listed.output
    token_id = web.store.users.list_tokens(web.users["bob"])[0].id
    assert token_id in listed.output and "tdk_" not in listed.output
    assert runner.invoke(app, ["users", "revoke", "bob", token_id, "--database-url", url]).exit_code == 0
    assert web.client.get(f"{API}/me", headers=web.auth("bob")).status_code == 401
    assert runner.invoke(app, ["users", "disable", "alice", "--database-url", url]).exit_code == 0
    assert web.client.get(f"{API}/me", headers=web.auth("alice")).status_code == 401
    users = runner.invoke(app, ["users", "list", "--database-url", url])
    assert "disabled" in users.output
    assert runner.invoke(app, ["users", "disable", "alice", "--enable", "--database-url", url]).exit_code == 0
    assert web.client.get(f"{API}/me", headers=web.auth("alice")).status_code == 200


def test_a_token_name_with_a_line_break_is_refused_everywhere(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.post("/account/tokens", data={"csrf_token": csrf, "name": "laptop\r\nadmin: root"})
    assert page.status_code == 422 and "no line break" in page.text and "new-token" not in page.text
    answer = web.client.post(f"{API}/me/tokens", headers=web.auth("alice"), params={"name": "laptop\nadmin"})
    assert answer.status_code == 422 and answer.json()["issues"][0]["field"] == "name"
    url = web.settings.resolved_database_url()
    cli = CliRunner().invoke(app, ["users", "token", "alice", "--label", "ci\nrunner", "--database-url", url])
    assert cli.exit_code == 1 and "a token name holds no line break" in cli.output and "Traceback" not in cli.output
    assert [row.name for row in web.store.users.list_tokens(web.users["alice"])] == ["default"]
