"""Signing in and out, cookie flags, and CSRF on forms and on cookie-authenticated API calls."""

from __future__ import annotations

from tests.fixtures.app import LOGIN_NONCE, AppHarness, sign_in
from tunedeck.web.session import COOKIE_NAME, SessionCodec


def _set_cookie_header(headers: object, name: str) -> str:
    values = [v for v in headers.get_list("set-cookie") if v.startswith(name + "=")]  # type: ignore[attr-defined]
    assert values, f"no Set-Cookie for {name}"
    return values[-1]


def test_login_sets_an_httponly_samesite_lax_cookie(web: AppHarness) -> None:
    page = web.client.get("/login")
    nonce = LOGIN_NONCE.search(page.text)
    assert nonce is not None
    answer = web.client.post(
        "/login", data={"token": web.tokens["alice"], "csrf_token": nonce.group(1), "next": "/datasets"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/datasets"
    cookie = _set_cookie_header(answer.headers, COOKIE_NAME).lower()
    assert "httponly" in cookie
    assert "samesite=lax" in cookie
    assert "path=/" in cookie
    assert "secure" not in cookie  # plain HTTP on loopback; HTTPS requests get Secure
    assert web.tokens["alice"] not in answer.headers.get("set-cookie", "")


def test_login_with_a_bad_token_is_refused_without_a_session(web: AppHarness) -> None:
    page = web.client.get("/login")
    nonce = LOGIN_NONCE.search(page.text)
    assert nonce is not None
    answer = web.client.post(
        "/login", data={"token": "tdk_not-a-real-token", "csrf_token": nonce.group(1)}, follow_redirects=False
    )
    assert answer.status_code == 401
    assert "not valid" in answer.text
    assert COOKIE_NAME not in answer.cookies
    assert web.client.get("/jobs", follow_redirects=False).status_code == 303


def test_login_without_the_form_token_is_refused(web: AppHarness) -> None:
    web.client.get("/login")
    answer = web.client.post(
        "/login", data={"token": web.tokens["alice"], "csrf_token": "forged"}, follow_redirects=False
    )
    assert answer.status_code == 403
    assert COOKIE_NAME not in answer.cookies


def test_next_never_leaves_the_site(web: AppHarness) -> None:
    page = web.client.get("/login")
    nonce = LOGIN_NONCE.search(page.text)
    assert nonce is not None
    answer = web.client.post(
        "/login", data={"token": web.tokens["alice"], "csrf_token": nonce.group(1), "next": "//evil.example/x"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == "/jobs"


def test_pages_redirect_to_login_when_signed_out(web: AppHarness) -> None:
    answer = web.client.get("/jobs/new", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/jobs/new"


def test_a_tampered_cookie_is_not_a_session(web: AppHarness) -> None:
    _, value = SessionCodec(b"another-key" * 3).new_session(web.users["alice"].id)
    web.client.cookies.set(COOKIE_NAME, value)
    assert web.client.get("/jobs", follow_redirects=False).status_code == 303


def test_form_post_without_csrf_token_is_rejected(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    job = web.store.jobs.enqueue(web.users["alice"], name="j", config={})
    answer = web.client.post(f"/jobs/{job.id}/cancel", data={}, follow_redirects=False)
    assert answer.status_code == 403
    assert web.store.jobs.get(web.users["alice"], job.id).state == "queued"
    wrong = web.client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": "nope"}, follow_redirects=False)
    assert wrong.status_code == 403
    assert web.store.jobs.get(web.users["alice"], job.id).state == "queued"


def test_form_post_with_csrf_token_acts(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    job = web.store.jobs.enqueue(web.users["alice"], name="j", config={})
    answer = web.client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 303
    assert web.store.jobs.get(web.users["alice"], job.id).state == "cancelled"


def test_logout_needs_csrf_and_ends_the_session(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    assert web.client.post("/logout", data={}, follow_redirects=False).status_code == 403
    answer = web.client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 303
    assert web.client.get("/jobs", follow_redirects=False).status_code == 303


def test_api_accepts_the_cookie_and_needs_the_csrf_header_for_changes(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    assert web.client.get("/api/v1/jobs").status_code == 200
    job = web.store.jobs.enqueue(web.users["alice"], name="j", config={})
    refused = web.client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert refused.status_code == 403
    assert web.store.jobs.get(web.users["alice"], job.id).state == "queued"
    accepted = web.client.post(f"/api/v1/jobs/{job.id}/cancel", headers={"X-CSRF-Token": csrf})
    assert accepted.status_code == 200
    assert accepted.json()["state"] == "cancelled"


def test_bearer_tokens_still_work_without_csrf(web: AppHarness) -> None:
    job = web.store.jobs.enqueue(web.users["bob"], name="j", config={})
    answer = web.client.post(
        f"/api/v1/jobs/{job.id}/cancel", headers={"Authorization": f"Bearer {web.tokens['bob']}"}
    )
    assert answer.status_code == 200
