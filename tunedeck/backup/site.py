"""The installation a backup reads or a restore fills: a database URL and an artifact store."""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.core.settings import Settings
from tunedeck.storage.base import ArtifactStore
from tunedeck.storage.factory import open_store_from_settings


@dataclass(frozen=True)
class BackupSite:
    """A database (SQLAlchemy URL) and the artifact store beside it."""

    database_url: str
    store: ArtifactStore

    @classmethod
    def from_settings(cls, settings: Settings) -> BackupSite:
        """The configured database and store (`TUNEDECK_DATABASE_URL`, `TUNEDECK_STORAGE_URL`, data dir).

        The store is opened as every other process opens it (encryption at rest, server-side
        encryption), so a backup holds the stored files' content and a restore seals them again.
        """
        store = open_store_from_settings(settings)
        return cls(database_url=settings.resolved_database_url(), store=store)


def resolve_site(site: Settings | BackupSite) -> BackupSite:
    """`site` itself, or the installation `Settings` name."""
    return site if isinstance(site, BackupSite) else BackupSite.from_settings(site)
