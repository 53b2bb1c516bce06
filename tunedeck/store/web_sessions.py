"""Dashboard sessions kept on the server: a cookie's secret is good only while its row exists.

Signing out deletes the row; revoking the token a session was opened with, or disabling
its user, deletes it too. A replayed cookie then finds nothing and is refused.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, func, select

from tunedeck.core.ids import new_id, new_token
from tunedeck.store.db import Database
from tunedeck.store.fencing import token_sha256
from tunedeck.store.models import ApiToken, User, WebSession
from tunedeck.store.types import utcnow


class WebSessionRepository:
    """Open, find and end dashboard sessions."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, user: User, token: ApiToken, lifetime_s: float) -> str:
        """A new session for `user`, opened with `token`; returns the secret for the cookie (stored only hashed)."""
        secret = new_token(32)
        now = utcnow()
        with self.db.write() as session:
            # Expired rows of this user go as a new one comes, so the table does not grow without end.
            session.execute(delete(WebSession).where(WebSession.user_id == user.id, WebSession.expires_at < now))
            session.add(
                WebSession(
                    id=new_id("ses_"),
                    user_id=user.id,
                    token_id=token.id,
                    secret_sha256=token_sha256(secret),
                    created_at=now,
                    expires_at=now + timedelta(seconds=lifetime_s),
                )
            )
        return secret

    def user_of(self, secret: str) -> User | None:
        """The signed-in user of a session secret; None when the session ended, expired or its user is disabled."""
        with self.db.read() as session:
            found = session.execute(
                select(WebSession, User)
                .join(User, User.id == WebSession.user_id)
                .where(WebSession.secret_sha256 == token_sha256(secret))
            ).one_or_none()
        if found is None:
            return None
        row, user = found
        if row.expires_at <= utcnow() or user.disabled_at is not None:
            return None
        return user

    def end(self, secret: str) -> None:
        """End the session of `secret` (signing out); nothing happens when it has already ended."""
        with self.db.write() as session:
            session.execute(delete(WebSession).where(WebSession.secret_sha256 == token_sha256(secret)))

    def count_for(self, user: User) -> int:
        """How many sessions of `user` are open (expired ones included until they are swept)."""
        with self.db.read() as session:
            statement = select(func.count()).select_from(WebSession).where(WebSession.user_id == user.id)
            return int(session.scalar(statement) or 0)
