"""A user's stored bytes, measured for the storage limit only where one applies (measuring lists storage)."""

from __future__ import annotations

from tunedeck.storage.base import ArtifactStore, stored_bytes_of_user
from tunedeck.store.quotas import QuotaRepository


def stored_bytes_if_limited(quotas: QuotaRepository, artifacts: ArtifactStore, user_id: str) -> int | None:
    """The user's stored bytes when they have a storage limit, else None (nothing is measured)."""
    if quotas.limits_for(user_id).storage_bytes is None:
        return None
    return stored_bytes_of_user(artifacts, user_id)
