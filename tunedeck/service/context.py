"""What a use case reaches: the server's settings, the job store and the artifact store.

A protocol, so each front end passes its own long-lived context (the API's `ApiContext`
among them) without the use cases knowing about requests.
"""

from __future__ import annotations

from typing import Protocol

from tunedeck.core.settings import Settings
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.store import JobStore


class ServiceContext(Protocol):
    """The collaborators a use case needs, whoever built them."""

    @property
    def settings(self) -> Settings:
        """The server's settings."""
        ...

    @property
    def jobs(self) -> JobStore:
        """The job store (rows and their repositories)."""
        ...

    @property
    def artifacts(self) -> ArtifactStore:
        """The artifact store (datasets, checkpoints, exports)."""
        ...
