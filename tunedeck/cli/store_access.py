"""The job store and artifact storage for operator commands: `--database-url`, or the configured ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunedeck.storage.base import ArtifactStore
    from tunedeck.store.store import JobStore

DATABASE_HELP = "Database URL (default: TUNEDECK_DATABASE_URL, else SQLite in the data directory)."


def open_job_store(database_url: str | None) -> JobStore:
    """The job store, migrated; the jobs layer is imported here so `tunedeck --help` stays fast."""
    from tunedeck.core.settings import Settings
    from tunedeck.store.store import JobStore

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    return JobStore.open(database_url or settings.resolved_database_url())


def open_artifact_store() -> ArtifactStore:
    """The configured artifact storage (`TUNEDECK_STORAGE_URL`, else the data directory's)."""
    from tunedeck.core.settings import Settings
    from tunedeck.storage.factory import open_store_from_settings

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    return open_store_from_settings(settings)


@dataclass(frozen=True)
class Operator:
    """Whoever runs the CLI on the server: reads every user's objects."""

    id: str = "cli"
    role: str = "admin"


def open_stores(database_url: str | None) -> tuple[JobStore, ArtifactStore]:
    """The job store (`--database-url`, else the configured one) and the configured artifact storage."""
    return open_job_store(database_url), open_artifact_store()
