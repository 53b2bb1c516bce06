"""Sealed test sets: seal a dataset version, and list every logged read of it (the experiment method).

Once sealed, a version is never training or validation data, its rows are not
previewed or inspected, and only the explicit final evaluation of a chosen job
(`tunedeck eval test`) reads it, logging each access. This router shows that log.
"""

from __future__ import annotations

from fastapi import APIRouter, Query

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.routes.datasets import version_out
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.api.schemas.datasets import DatasetVersionOut, TestSetAccessesOut, TestSetAccessOut
from tunedeck.service.datasets.dataset_store import pick_version

router = APIRouter(prefix="/datasets", tags=["datasets"])
_VERSION = Query(None, ge=1, le=SQL_INT_MAX, description="Version number; the newest when absent.")


@router.post(
    "/{dataset_id}/seal",
    response_model=DatasetVersionOut,
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut, "description": "An unfinished job uses it."}},
)
def seal_version(
    dataset_id: str, user: CurrentUser, context: Context, version: int | None = _VERSION
) -> DatasetVersionOut:
    """Seal a version as a held-out test set (one-way; sealing a sealed version changes nothing).

    409 while an unfinished job trains or validates on it.
    """
    picked = pick_version(context, user, dataset_id, version)
    return version_out(context.jobs.datasets.seal(user, picked.id))


@router.get("/{dataset_id}/test-accesses", response_model=TestSetAccessesOut, responses={404: {"model": ErrorOut}})
def list_test_accesses(
    dataset_id: str, user: CurrentUser, context: Context, version: int | None = _VERSION
) -> TestSetAccessesOut:
    """Every logged read of a version, oldest first, and the warning once it was read more than once."""
    from tunedeck.eval.sealed_test_log import TestSetAccess, reuse_warning

    picked = pick_version(context, user, dataset_id, version)
    rows = context.jobs.datasets.list_test_set_accesses(user, picked.id)
    accesses = [TestSetAccess(job_id=r.job_id, user_id=r.user_id, purpose=r.purpose, time=r.time) for r in rows]
    return TestSetAccessesOut(
        dataset_id=dataset_id,
        version=picked.version,
        version_id=picked.id,
        sealed=picked.sealed,
        access_count=len(accesses),
        accesses=[
            TestSetAccessOut(job_id=a.job_id, user_id=a.user_id, purpose=a.purpose, time=a.time) for a in accesses
        ],
        warning=reuse_warning(accesses),
    )
