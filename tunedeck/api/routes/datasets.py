"""Datasets: streaming upload (validated before anything is registered), list, get, rights, preview, reports, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from tunedeck.api.access_records import record_read
from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.dataset_reads import refuse_purged_read, refuse_sealed_read
from tunedeck.api.routes.deletions import DELETE_RESPONSES, deletion_accepted
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.api.schemas.datasets import (
    DatasetOut,
    DatasetPreviewOut,
    DatasetReportOut,
    DatasetRightsIn,
    DatasetVersionOut,
    HubDatasetIn,
    ReportName,
)
from tunedeck.api.upload_requests import receive_and_queue
from tunedeck.api.work_answers import WAIT, WORK_RESPONSES, waited_answer
from tunedeck.core.column_map import (
    COLUMN_MAP_MAX_LENGTH,
    COLUMN_MAP_PATTERN,
    COLUMN_MAP_SYNTAX,
)
from tunedeck.core.dataset_rights import (
    LICENCE_HELP,
    LICENCE_MAX_LENGTH,
    LICENCE_PATTERN,
    RIGHTS_NOTE_HELP,
    RIGHTS_NOTE_MAX_LENGTH,
    RIGHTS_NOTE_PATTERN,
)
from tunedeck.core.dataset_vocabulary import FILE_TYPES, NAME_PATTERN, POLICIES, SOURCE_FORMATS
from tunedeck.service.datasets.dataset_store import (
    pick_version,
    queue_hub_ingestion,
    read_preview,
)
from tunedeck.service.datasets.dataset_versions import PREVIEW_ROWS
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.service.privacy.retention_dates import scheduled_at, version_schedule
from tunedeck.store.models import Dataset, DatasetVersion

router = APIRouter(prefix="/datasets", tags=["datasets"])
# Its own path: under /datasets, "hub" would read as a dataset id to the routes of one dataset.
hub_router = APIRouter(prefix="/hub-datasets", tags=["datasets"])

_UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **WORK_RESPONSES,
    400: {"model": ErrorOut, "description": "Malformed multipart body."},
    409: {"model": ErrorOut, "description": "A dataset of that name exists."},
    413: {"model": ErrorOut, "description": "Larger than the upload size or row limit."},
    415: {"model": ErrorOut, "description": "Not multipart/form-data."},
    422: {"model": ErrorOut, "description": "Invalid rows: every issue with its line and field."},
}
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "additionalProperties": False,
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "JSONL, JSON, CSV or Parquet."},
                        "name": {
                            "type": "string",
                            "pattern": NAME_PATTERN.pattern,
                            "description": "Dataset name (default: the file's stem).",
                        },
                        "format": {
                            "type": "string",
                            "enum": ["auto", *SOURCE_FORMATS],
                            "default": "auto",
                            "description": "Row format, or auto to tell it from the rows.",
                        },
                        "file_type": {
                            "type": "string",
                            "enum": list(FILE_TYPES),
                            "description": "How to read the file (default: from its name's extension).",
                        },
                        "label_column": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 200,
                            "description": "Field holding a classification label when it is not `label` "
                            "(implies the classification format).",
                        },
                        "column_map": {
                            "type": "string",
                            "pattern": COLUMN_MAP_PATTERN,
                            "maxLength": COLUMN_MAP_MAX_LENGTH,
                            "description": "Rename the file's fields before its rows are read: "
                            f"{COLUMN_MAP_SYNTAX}. Each target (left of `=`) may be named once.",
                        },
                        "drop_invalid": {"type": "boolean", "default": False},
                        "scan_policy": {
                            "type": "string",
                            "enum": list(POLICIES),
                            "description": "Secrets and personal data: warn (default for a new dataset), block "
                            "the upload, or redact them before storing. A new version keeps the dataset's policy.",
                        },
                        "licence": {
                            "type": "string",
                            "maxLength": LICENCE_MAX_LENGTH,
                            "pattern": LICENCE_PATTERN,
                            "description": LICENCE_HELP + " A new version that names one replaces the dataset's.",
                        },
                        "rights_note": {
                            "type": "string",
                            "maxLength": RIGHTS_NOTE_MAX_LENGTH,
                            "pattern": RIGHTS_NOTE_PATTERN,
                            "description": RIGHTS_NOTE_HELP,
                        },
                    },
                }
            }
        },
    }
}


def version_out(version: DatasetVersion) -> DatasetVersionOut:
    """The wire form of a version row."""
    manifest = version.manifest or {}
    return DatasetVersionOut(
        id=version.id,
        version=version.version,
        kind=version.kind,
        source_format=version.format,
        rows=version.rows,
        sha256=version.sha256,
        size_bytes=int(manifest.get("size_bytes", 0)),
        dropped_rows=int(manifest.get("dropped", 0)),
        sealed=version.sealed,
        column_map=dict((manifest.get("notes") or {}).get("column_map") or {}),
        created_at=version.created_at,
        purged_at=version.purged_at,
    )


def _dataset_out(context: ApiContext, user: Principal, dataset: Dataset) -> DatasetOut:
    versions = context.jobs.datasets.list_versions(user, dataset.id)
    return DatasetOut(
        id=dataset.id,
        name=dataset.name,
        created_at=dataset.created_at,
        latest=version_out(versions[-1]) if versions else None,
        versions=len(versions),
        licence=dataset.licence,
        rights_note=dataset.rights_note,
    )


@router.post("", status_code=status.HTTP_202_ACCEPTED, openapi_extra=_UPLOAD_BODY, responses=_UPLOAD_RESPONSES)
async def upload_dataset(request: Request, user: CurrentUser, context: Context, wait: float = WAIT) -> Any:
    """Upload a new dataset (multipart, field `file`); a worker validates it and registers it if every row is valid.

    Answers 202 with the ingestion's work item at once; with `wait`, when it ends: 200 with the item
    (its `result` names the new dataset and version) or the refusal (409, 413, 422 with every issue).
    With `drop_invalid=true`, invalid rows are skipped and listed in the validation report.
    """
    item = await receive_and_queue(request, context, user)
    return await waited_answer(request, context, user, item, wait)


@hub_router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    responses={**WORK_RESPONSES, 409: _UPLOAD_RESPONSES[409], 422: _UPLOAD_RESPONSES[422]},
)
async def register_hub_dataset(
    body: HubDatasetIn, request: Request, user: CurrentUser, context: Context, wait: float = WAIT
) -> Any:
    """Register one split of a Hugging Face Hub dataset as a new dataset; a worker fetches and validates it.

    No dataset code runs (a repository with a loading script is refused) and the version's
    manifest records the id, split, subset, the revision asked for and the commit it resolved to.
    Answers as an upload does: 202 with the work item, or with `wait` the item or its refusal.
    """
    inputs = {
        "hub": {"id": body.hub, "split": body.split, "subset": body.subset, "revision": body.revision},
        "display_name": f"hub:{body.hub}",
        "format": body.format,
        "file_type": None,
        "label_column": body.label_column,
        "drop_invalid": body.drop_invalid,
        "scan_policy": body.scan_policy,
        "max_rows": context.settings.max_upload_rows,
        "dataset_id": None,
        "name": body.name or body.hub.rsplit("/", 1)[-1],
        "licence": body.licence,
        "rights_note": body.rights_note,
    }
    item = await run_in_threadpool(queue_hub_ingestion, context, user, inputs)
    return await waited_answer(request, context, user, item, wait)


@router.post(
    "/{dataset_id}/versions",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra=_UPLOAD_BODY,
    responses={404: {"model": ErrorOut}, **_UPLOAD_RESPONSES},
)
async def upload_version(
    dataset_id: str, request: Request, user: CurrentUser, context: Context, wait: float = WAIT
) -> Any:
    """Upload a new version of an existing dataset (same form and answers as creating one; `name` is ignored)."""
    # Checked before reading the body: no upload is processed for a dataset the caller cannot see.
    await run_in_threadpool(context.jobs.datasets.get_dataset, user, dataset_id)
    versions = await run_in_threadpool(context.jobs.datasets.list_versions, user, dataset_id)
    inherited = str(((versions[-1].reports or {}).get("scan") or {}).get("policy", "warn")) if versions else "warn"
    item = await receive_and_queue(request, context, user, dataset_id=dataset_id, inherited_policy=inherited)
    return await waited_answer(request, context, user, item, wait)


@router.get("", response_model=list[DatasetOut])
def list_datasets(user: CurrentUser, context: Context) -> list[DatasetOut]:
    """The caller's datasets, oldest first."""
    return [_dataset_out(context, user, d) for d in context.jobs.datasets.list_datasets(user)]


@router.get("/{dataset_id}", response_model=DatasetOut, responses={404: {"model": ErrorOut}})
def get_dataset(dataset_id: str, user: CurrentUser, context: Context) -> DatasetOut:
    """One dataset and its newest version, with when a retention policy deletes that version's raw data."""
    out = _dataset_out(context, user, context.jobs.datasets.get_dataset(user, dataset_id))
    if out.latest is not None:
        schedule = version_schedule(context, out.latest.id)
        out.latest.raw_data_deleted_after = scheduled_at(schedule, "raw_data")
    return out


@router.patch("/{dataset_id}", response_model=DatasetOut, responses={404: {"model": ErrorOut}})
def update_dataset_rights(dataset_id: str, body: DatasetRightsIn, user: CurrentUser, context: Context) -> DatasetOut:
    """Record or change a dataset's licence and rights note; a field left out stays, null or "" clears it.

    Reports and model cards made afterwards show the new values; an export already built keeps
    the card it was built with.
    """
    dataset = context.jobs.datasets.set_rights(user, dataset_id, body.changes())
    return _dataset_out(context, user, dataset)


@router.get(
    "/{dataset_id}/versions", response_model=list[DatasetVersionOut], responses={404: {"model": ErrorOut}}
)
def list_versions(dataset_id: str, user: CurrentUser, context: Context) -> list[DatasetVersionOut]:
    """Every version of a dataset, oldest first."""
    return [version_out(v) for v in context.jobs.datasets.list_versions(user, dataset_id)]


@router.get(
    "/{dataset_id}/preview",
    response_model=DatasetPreviewOut,
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut, "description": "A sealed test set."}},
)
def preview_dataset(
    dataset_id: str,
    request: Request,
    user: CurrentUser,
    context: Context,
    limit: int = Query(20, ge=1, le=PREVIEW_ROWS),
    version: int | None = Query(None, ge=1, le=SQL_INT_MAX, description="Version number; the newest when absent."),
) -> DatasetPreviewOut:
    """The first rows of a version, in canonical form; 409 for a sealed test set (its rows stay unread).

    Each preview is recorded in the owner's access log.
    """
    picked = pick_version(context, user, dataset_id, version)
    refuse_sealed_read(picked)
    refuse_purged_read(context, user, picked)
    rows = read_preview(context, picked, limit)
    dataset = context.jobs.datasets.get_dataset(user, dataset_id)
    record_read(
        context, request, user, owner_id=picked.owner_id, object_kind="dataset_version", object_id=picked.id,
        object_label=f"{dataset.name} v{picked.version}", action="preview",
    )  # fmt: skip
    return DatasetPreviewOut(dataset_id=dataset_id, version=picked.version, rows=rows, total_rows=picked.rows)


@router.get(
    "/{dataset_id}/reports/{report}", response_model=DatasetReportOut, responses={404: {"model": ErrorOut}}
)
def dataset_report(
    dataset_id: str,
    report: ReportName,
    user: CurrentUser,
    context: Context,
    version: int | None = Query(None, ge=1, le=SQL_INT_MAX, description="Version number; the newest when absent."),
) -> DatasetReportOut:
    """The validation, dedup or PII/secret scan report computed at upload (findings are masked)."""
    picked = pick_version(context, user, dataset_id, version)
    body = (picked.reports or {}).get(report)
    if body is None:
        raise HTTPException(404, f"no {report} report for version {picked.version}")
    return DatasetReportOut(dataset_id=dataset_id, version=picked.version, name=report, report=body)


@router.delete("/{dataset_id}", status_code=status.HTTP_202_ACCEPTED, response_model=None, responses=DELETE_RESPONSES)
def delete_dataset(
    dataset_id: str,
    user: CurrentUser,
    context: Context,
    with_models: bool = Query(False, description="Also delete the jobs trained on this dataset (else 409 lists them)."),
) -> JSONResponse:
    """Delete a dataset and its versions: rows at once, then stored files and tokenized caches; the receipt."""
    return deletion_accepted(request_deletion(context.jobs, user, "dataset", dataset_id, with_models=with_models))


@router.delete(
    "/{dataset_id}/versions/{version}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=None,
    responses=DELETE_RESPONSES,
)
def delete_dataset_version(
    dataset_id: str,
    version: int,
    user: CurrentUser,
    context: Context,
    with_models: bool = Query(False, description="Also delete the jobs trained on this version (else 409 lists them)."),
) -> JSONResponse:
    """Delete one version of a dataset (the dataset and its other versions stay); the receipt."""
    picked = pick_version(context, user, dataset_id, version)
    return deletion_accepted(
        request_deletion(context.jobs, user, "dataset_version", picked.id, with_models=with_models)
    )
