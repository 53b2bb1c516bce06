"""Dashboard sessions: a signed cookie naming the user and a CSRF token, and the API authenticator for it.

Signing in exchanges an API token for a cookie (HttpOnly, SameSite=Lax, Secure
over HTTPS) that holds `{session secret, csrf token}`, signed with a key kept in
the data directory. The session itself lives on the server (only the secret's
SHA-256 is stored): signing out, revoking the token it was opened with or
disabling the user ends it at once, so a copied cookie stops working too. The
API token is never stored in the cookie.
Every state-changing request made with the cookie must prove it came from our
pages: forms carry the CSRF token in a hidden field, browser `fetch` calls send
it in the `X-CSRF-Token` header. The API accepts the cookie through
`session_authenticator`, so the dashboard's JavaScript calls the same routes as
any client, with the same owner checks.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.responses import Response

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext, Authenticator

COOKIE_NAME = "tunedeck_session"
LOGIN_COOKIE_NAME = "tunedeck_login_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SESSION_SECONDS = 12 * 3600
LOGIN_FORM_SECONDS = 3600
KEY_FILE = "session.key"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class SessionData:
    """What the cookie carries: the server-side session's secret and the token its forms must echo."""

    secret: str
    csrf: str


class SessionCodec:
    """Signs and checks session cookies and login-form tokens with one secret key."""

    def __init__(self, secret: bytes) -> None:
        self._sessions = URLSafeTimedSerializer(secret, salt="tunedeck-session")
        self._login = URLSafeTimedSerializer(secret, salt="tunedeck-login-form")

    def new_session(self, secret: str) -> tuple[SessionData, str]:
        """The cookie of the server-side session `secret`, with a new CSRF token."""
        data = SessionData(secret=secret, csrf=secrets.token_urlsafe(32))
        return data, self._sessions.dumps({"s": data.secret, "c": data.csrf})

    def read_session(self, value: str | None) -> SessionData | None:
        """The session in a cookie value, or None when absent, tampered with or expired."""
        if not value:
            return None
        try:
            raw = self._sessions.loads(value, max_age=SESSION_SECONDS)
        except BadSignature:  # also covers SignatureExpired
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("s"), str) or not isinstance(raw.get("c"), str):
            return None
        return SessionData(secret=raw["s"], csrf=raw["c"])

    def new_login_nonce(self) -> tuple[str, str]:
        """A nonce for the login form: (cookie value, form field value); both must come back together."""
        nonce = secrets.token_urlsafe(24)
        return self._login.dumps(nonce), nonce

    def login_nonce_matches(self, cookie_value: str | None, form_value: str | None) -> bool:
        """Whether the login form's hidden token matches the signed nonce of its cookie (double submit)."""
        if not cookie_value or not form_value:
            return False
        try:
            nonce = self._login.loads(cookie_value, max_age=LOGIN_FORM_SECONDS)
        except BadSignature:
            return False
        return isinstance(nonce, str) and hmac.compare_digest(nonce, form_value)


def load_or_create_secret(data_dir: Path) -> bytes:
    """The session signing key kept in `data_dir`, created (mode 0600) on first use.

    Kept on disk so sessions survive a restart; delete the file to sign everyone out.
    """
    path = data_dir / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return path.read_bytes()
    with os.fdopen(fd, "wb") as handle:
        handle.write(secret)
    return secret


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """Set a dashboard cookie: HttpOnly, SameSite=Lax, Secure when the request came over HTTPS."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )


def csrf_matches(expected: str, presented: str | None) -> bool:
    """Constant-time check of a presented CSRF token against the session's."""
    return bool(presented) and hmac.compare_digest(expected, presented or "")


def session_user(request: Request, context: ApiContext, codec: SessionCodec) -> tuple[Principal, SessionData] | None:
    """The signed-in user and session of a request's cookie, or None (no cookie, bad cookie, ended session)."""
    session = codec.read_session(request.cookies.get(COOKIE_NAME))
    if session is None:
        return None
    user = context.jobs.sessions.user_of(session.secret)
    if user is None:
        return None
    return Principal.of(user), session


def session_authenticator(codec: SessionCodec) -> Authenticator:
    """An API authenticator accepting the dashboard cookie; unsafe methods also need the CSRF header."""

    def authenticate(request: Request, context: ApiContext) -> Principal | None:
        found = session_user(request, context, codec)
        if found is None:
            return None
        principal, session = found
        if request.method not in SAFE_METHODS and not csrf_matches(session.csrf, request.headers.get(CSRF_HEADER)):
            raise HTTPException(403, "missing or wrong X-CSRF-Token header for a cookie-authenticated request")
        return principal

    return authenticate
