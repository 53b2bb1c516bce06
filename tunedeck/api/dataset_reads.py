"""Refusing a direct read of a dataset version's rows over HTTP: 410 once its raw data was deleted, 409 when sealed."""

from __future__ import annotations

from fastapi import HTTPException, status

from tunedeck.api.context import ApiContext
from tunedeck.service.datasets.dataset_store import purged_data_message
from tunedeck.store.access import Actor
from tunedeck.store.models import DatasetVersion


def refuse_purged_read(context: ApiContext, actor: Actor, version: DatasetVersion) -> None:
    """410 for a read of a version's rows (preview, inspection, download) once its raw data was deleted."""
    if version.purged_at is not None:
        raise HTTPException(status.HTTP_410_GONE, purged_data_message(context, actor, version))


def refuse_sealed_read(version: DatasetVersion) -> None:
    """409 for a direct read of a sealed test set's rows (preview, inspection): only the final evaluation reads it."""
    if version.sealed:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"version {version.version} is a sealed test set: its rows are read only by the explicit final "
            "evaluation of a chosen job (`tunedeck eval test`), which logs every access",
        )
