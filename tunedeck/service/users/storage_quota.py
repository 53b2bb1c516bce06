"""A user's stored bytes, measured for the storage limit only where one applies (measuring lists storage)."""

from __future__ import annotations

from functools import partial

from tunedeck.service.context import ServiceContext
from tunedeck.service.users.storage_use import stored_bytes_if_limited as stored_bytes_within_limit
from tunedeck.storage.base import stored_bytes_of_user
from tunedeck.store.quotas import StorageMeter


def storage_meter(context: ServiceContext) -> StorageMeter:
    """Measures one user's bytes in this app's artifact storage."""
    return partial(stored_bytes_of_user, context.artifacts)


def stored_bytes_if_limited(context: ServiceContext, user_id: str) -> int | None:
    """The user's stored bytes when they have a storage limit, else None (nothing is measured)."""
    return stored_bytes_within_limit(context.jobs.quotas, context.artifacts, user_id)
