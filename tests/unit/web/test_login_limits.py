"""Failed sign-ins are limited per address and overall; a limited address is told when it may try again."""

from __future__ import annotations

import re

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.web.login_limits import LoginLimiter


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_is_limited_after_its_failures_and_free_again_after_the_window() -> None:
    clock = _Clock()
    limiter = LoginLimiter(per_address=3, overall=100, window_s=60, clock=clock)
    for _ in range(3):
        assert limiter.wait_seconds("10.0.0.1") == 0
        limiter.failed("10.0.0.1")
    assert 1 <= limiter.wait_seconds("10.0.0.1") <= 61
    assert limiter.wait_seconds("10.0.0.2") == 0  # another address is not held back by this one
    clock.now += 61
    assert limiter.wait_seconds("10.0.0.1") == 0


def test_failures_from_every_address_together_are_limited() -> None:
    clock = _Clock()
    limiter = LoginLimiter(per_address=100, overall=5, window_s=60, clock=clock)
    for number in range(5):
        limiter.failed(f"10.0.0.{number}")
    assert limiter.wait_seconds("10.9.9.9") > 0


def _login(web: AppHarness, token: str) -> tuple[int, str, str | None]:
    page = web.client.get("/login")
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert nonce is not None
    answer = web.client.post(
        "/login", data={"token": token, "csrf_token": nonce.group(1), "next": "/jobs"}, follow_redirects=False
    )
    return answer.status_code, answer.text, answer.headers.get("retry-after")


def test_the_sign_in_form_refuses_an_address_after_ten_failures_even_with_a_good_token(web: AppHarness) -> None:
    for _ in range(10):
        assert _login(web, "tdk_wrong")[0] == 401
    status, text, retry_after = _login(web, web.tokens["alice"])
    assert status == 429 and "Too many failed sign-ins" in text
    assert retry_after is not None and int(retry_after) > 0
    web.client.app.state.dashboard.login_limiter = LoginLimiter()  # type: ignore[attr-defined]
    assert sign_in(web.client, web.tokens["alice"])  # the window passed: signs in again
