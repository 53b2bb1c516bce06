"""The job store for commands an operator runs on the server: `--database-url`, or the configured one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tunedeck.jobs.store import JobStore

DATABASE_HELP = "Database URL (default: TUNEDECK_DATABASE_URL, else SQLite in the data directory)."


def open_job_store(database_url: str | None) -> JobStore:
    """The job store, migrated; the jobs layer is imported here so `tunedeck --help` stays fast."""
    from tunedeck.core.settings import Settings
    from tunedeck.jobs.store import JobStore

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    return JobStore.open(database_url or settings.resolved_database_url())
