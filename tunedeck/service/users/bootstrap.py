"""First start of the service: migrate the database and create the first admin."""

from __future__ import annotations

from tunedeck.core.file_modes import protect_private_paths
from tunedeck.core.settings import Settings
from tunedeck.store.db import sqlite_files, upgrade_database
from tunedeck.store.store import JobStore


def prepare_database(settings: Settings) -> int:
    """Bring the schema up to date; returns how many users exist (0 on a first start)."""
    url = settings.resolved_database_url()
    protect_private_paths(settings.data_dir)
    upgrade_database(url)
    protect_private_paths(settings.data_dir, sqlite_files(url))  # a database made by a laxer version too
    with JobStore.open(url, migrate=False) as store:
        return store.users.count_users()


def bootstrap_admin(settings: Settings, name: str = "admin") -> str | None:
    """Create admin `name` and return its token (show it once) when no user exists yet; else None."""
    with JobStore.open(settings.resolved_database_url(), migrate=False) as store:
        if store.users.count_users() > 0:
            return None
        user = store.users.create_user(name, admin=True)
        token, _ = store.users.issue_token(user, "bootstrap")
        return token
