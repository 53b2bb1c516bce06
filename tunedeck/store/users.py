"""Users and API tokens: tokens are random, shown once, and stored only as SHA-256."""

from __future__ import annotations

import hmac
import json
import re
from datetime import timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tunedeck.core.dashboard_languages import LANGUAGES
from tunedeck.core.errors import Issue, IssueListError, NotFoundError
from tunedeck.core.ids import new_id, new_token
from tunedeck.store.db import Database
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.fencing import token_sha256
from tunedeck.store.models import ApiToken, User, WebSession
from tunedeck.store.types import utcnow

TOKEN_PREFIX = "tdk_"
ROLES = ("admin", "user")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
# Recording every use would make each API request a write; a minute's precision is enough.
_LAST_USED_PRECISION = timedelta(minutes=1)


class UserRepository:
    """Create users, issue and check API tokens."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_user(self, name: str, *, admin: bool = False) -> User:
        """A new user; AlreadyExistsError when the name is taken."""
        if not _NAME.match(name):
            raise IssueListError(
                [Issue("invalid user name", field="name", expected="letters, digits, _ . @ - (max 100)")],
                title="invalid user",
            )
        user = User(id=new_id("usr_"), name=name, role="admin" if admin else "user", created_at=utcnow())
        try:
            with self.db.write() as session:
                session.add(user)
        except IntegrityError:
            raise AlreadyExistsError(f"user {name!r} already exists") from None
        return user

    def get_user(self, user_id: str) -> User:
        """The user with this id; NotFoundError otherwise."""
        with self.db.read() as session:
            user = session.get(User, user_id)
        if user is None:
            raise NotFoundError(f"user {user_id!r} not found")
        return user

    def get_user_by_name(self, name: str) -> User:
        """The user with this name; NotFoundError otherwise."""
        with self.db.read() as session:
            return _named(session, name)

    def list_users(self) -> list[User]:
        """Every user, oldest first."""
        with self.db.read() as session:
            return list(session.scalars(select(User).order_by(User.id)))

    def count_users(self) -> int:
        """How many users exist (0 on a fresh install, when `serve` creates the first admin)."""
        with self.db.read() as session:
            return int(session.scalar(select(func.count()).select_from(User)) or 0)

    def issue_token(self, user: User, name: str = "default") -> tuple[str, ApiToken]:
        """A new token for `user`: the plain token (show it once, never store or log it) and its row.

        IssueListError naming the field `name` when the name breaks `token_name_problem`.
        """
        problem = token_name_problem(name)
        if problem is not None:
            issue = Issue(problem, field="name", found=json.dumps(name)[:60])
            raise IssueListError([issue], title="invalid token name")
        plain = TOKEN_PREFIX + new_token(32)
        row = ApiToken(
            id=new_id("tok_"),
            user_id=user.id,
            token_sha256=token_sha256(plain),
            name=name,
            created_at=utcnow(),
        )
        with self.db.write() as session:
            if session.get(User, user.id) is None:
                raise NotFoundError(f"user {user.id!r} not found")
            session.add(row)
        return plain, row

    def authenticate(self, plain: str) -> User | None:
        """The user a plain token belongs to, or None; compares SHA-256 hashes, never plain tokens."""
        found = self.authenticate_token(plain)
        return found[0] if found else None

    def authenticate_token(self, plain: str) -> tuple[User, ApiToken] | None:
        """The user and token row of a plain token, or None (unknown, revoked, or its user disabled)."""
        if not plain or not plain.startswith(TOKEN_PREFIX):
            return None
        digest = token_sha256(plain)
        with self.db.read() as session:
            found = session.execute(
                select(ApiToken, User).join(User, User.id == ApiToken.user_id).where(ApiToken.token_sha256 == digest)
            ).one_or_none()
        if found is None:
            return None
        token, user = found
        if not hmac.compare_digest(token.token_sha256, digest) or user.disabled_at is not None:
            return None
        now = utcnow()
        if token.last_used_at is None or now - token.last_used_at > _LAST_USED_PRECISION:
            with self.db.write() as session:
                current = session.get(ApiToken, token.id)
                if current is None:  # revoked meanwhile
                    return None
                current.last_used_at = now
        return user, token

    def set_disabled(self, name: str, disabled: bool) -> User:
        """Disable (or enable again) a user: a disabled user's tokens and dashboard sessions stop working at once."""
        with self.db.write() as session:
            user = _named(session, name)
            user.disabled_at = (user.disabled_at or utcnow()) if disabled else None
            if disabled:
                session.execute(delete(WebSession).where(WebSession.user_id == user.id))
        return user

    def set_role(self, name: str, role: str) -> User:
        """Make a user an `admin` or a plain `user`."""
        if role not in ROLES:
            raise IssueListError(
                [Issue("unknown role", field="role", expected=" or ".join(ROLES), found=role)], title="invalid user"
            )
        with self.db.write() as session:
            user = _named(session, name)
            user.role = role
        return user

    def set_locale(self, user_id: str, locale: str | None) -> User:
        """The dashboard language `user_id` chose (one of LANGUAGES), or None to follow their browser's."""
        if locale is not None and locale not in LANGUAGES:
            raise IssueListError(
                [Issue("unknown language", field="language", expected=" or ".join(LANGUAGES), found=locale)],
                title="invalid language",
            )
        with self.db.write() as session:
            user = session.get(User, user_id)
            if user is None:
                raise NotFoundError(f"user {user_id!r} not found")
            user.locale = locale
        return user

    def list_tokens(self, user: User) -> list[ApiToken]:
        """The tokens of `user` (hashes and names only)."""
        with self.db.read() as session:
            return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)))

    def revoke_token(self, user: User, token_id: str) -> None:
        """Delete one of `user`'s tokens, and the dashboard sessions opened with it; NotFoundError if not theirs."""
        with self.db.write() as session:
            token = session.get(ApiToken, token_id)
            if token is None or token.user_id != user.id:
                raise NotFoundError(f"token {token_id!r} not found")
            session.execute(delete(WebSession).where(WebSession.token_id == token_id))
            session.delete(token)


def _named(session: Session, name: str) -> User:
    """The user called `name` in this session; NotFoundError otherwise."""
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        raise NotFoundError(f"user {name!r} not found")
    return user


TOKEN_NAME_MAX = 100
# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: a token name is shown in
# tables, logs and the access log, where a line break would forge a line. JSON Schema states it as a pattern.
_NAME_BREAKING = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
TOKEN_NAME_PATTERN = f"^[^{_NAME_BREAKING}]*$"
_NAME_BREAKERS = re.compile(f"[{_NAME_BREAKING}]")


def token_name_problem(name: str) -> str | None:
    """Why `name` cannot name a token (1 to 100 characters, no control character or line break); None if it can."""
    if not 1 <= len(name) <= TOKEN_NAME_MAX:
        return f"a token name has 1 to {TOKEN_NAME_MAX} characters"
    if _NAME_BREAKERS.search(name):
        return "a token name holds no line break, tab or other control character"
    return None
