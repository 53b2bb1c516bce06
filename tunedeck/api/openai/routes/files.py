"""`/v1/files`: files for fine-tuning, each one dataset version (the file id is the version's id).

An upload is validated and ingested exactly as `POST /api/v1/datasets` does it (same limits,
same scan policy, every bad row named by file, line and field); the answer comes once the
ingestion ends. Only `purpose="fine-tune"` is accepted.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from tunedeck.api.access_records import record_read
from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.dataset_reads import refuse_purged_read, refuse_sealed_read
from tunedeck.api.errors import ErrorAnswer
from tunedeck.api.openai.errors import render_openai_error
from tunedeck.api.openai.pages import Order, page_after
from tunedeck.api.openai.schemas.files import FILE_PURPOSE, FileDeletedOut, FileList, FileOut
from tunedeck.api.schemas.common import IssueOut
from tunedeck.api.schemas.work import WAIT_MAX_S
from tunedeck.api.upload_requests import FormFields, default_dataset_name, receive_and_queue
from tunedeck.api.work_answers import wait_for_end
from tunedeck.core.errors import Issue, IssueListError
from tunedeck.core.ids import new_id
from tunedeck.core.states import WorkState
from tunedeck.service.datasets.dataset_versions import DATA_FILE, version_prefix
from tunedeck.service.datasets.received_upload import ReceivedUpload
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.store.models import DatasetVersion

router = APIRouter(prefix="/files", tags=["files"])
PURPOSE_FIELD = "purpose"
RIGHTS_FIELDS = ("licence", "rights_note")
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", PURPOSE_FIELD],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "JSONL, JSON, CSV or Parquet."},
                        PURPOSE_FIELD: {"type": "string", "enum": [FILE_PURPOSE]},
                    },
                }
            }
        },
    }
}


def file_out(version: DatasetVersion) -> FileOut:
    """A dataset version as the client's FileObject."""
    manifest = version.manifest or {}
    return FileOut(
        id=version.id,
        bytes=int(manifest.get("size_bytes", 0)),
        created_at=int(version.created_at.timestamp()),
        filename=str(manifest.get("name") or f"{version.id}.jsonl"),
    )


def _upload_fields(context: ApiContext, user: Principal) -> FormFields:
    """The dataset form's fields of a `/v1/files` upload: `purpose` checked and taken out, a free dataset name."""

    def fields(received: ReceivedUpload) -> dict[str, str]:
        form = dict(received.fields)
        purpose = form.pop(PURPOSE_FIELD, None)
        if purpose != FILE_PURPOSE:
            raise IssueListError(
                [Issue("this server keeps files for fine-tuning only", field=PURPOSE_FIELD,
                       expected=f'"{FILE_PURPOSE}"', found=purpose or "nothing")],
                title="unsupported purpose",
            )  # fmt: skip
        for rights_field in RIGHTS_FIELDS:
            if rights_field in form:
                # The client's FileObject has no licence: it is recorded on the dataset afterwards.
                raise IssueListError(
                    [Issue("a file takes no licence; record it on the dataset the file becomes "
                           "(PATCH /api/v1/datasets/{dataset_id})",
                           field=rights_field, expected="no such field")],
                    title="unsupported field",
                )  # fmt: skip
        if "name" not in form:
            # A file name may be uploaded many times: each upload is a dataset of its own.
            name = default_dataset_name(received)
            if context.jobs.datasets.find_by_name(user, name) is not None:
                name = f"{name[:80]}-{new_id()[-8:].lower()}"
            form["name"] = name
        return form

    return fields


@router.post("", response_model=FileOut, openapi_extra=_UPLOAD_BODY)
async def upload_file(request: Request, user: CurrentUser, context: Context) -> Any:
    """Upload a file for fine-tuning (multipart: `file`, and `purpose` = `fine-tune`; any other purpose is a 400).

    The file is validated and stored as a new dataset (named after the file; a name already
    taken gets a short unique ending), with tunedeck's upload limits and scan policy; the
    dataset form's own fields (`format`, `column_map`, `scan_policy`, ...) may be sent too.
    Answers when the ingestion ends: the FileObject, or a 400 naming each bad row's file,
    line, field and what was expected (413 past the size or row limit). A worker must be
    running; an ingestion still waiting after 120 s is a 503.
    """
    item = await receive_and_queue(request, context, user, form_fields=_upload_fields(context, user))
    item = await wait_for_end(context, user, item, WAIT_MAX_S)
    if item.state == WorkState.SUCCEEDED.value:
        version_id = str((item.result or {})["version_id"])
        version = await run_in_threadpool(context.jobs.datasets.get_version, user, version_id)
        return file_out(version)
    if not WorkState(item.state).is_terminal:
        raise HTTPException(
            503,
            f"the file's ingestion ({item.id}) did not end within {WAIT_MAX_S} s: is a worker running?",
        )
    error = item.error or {}
    issues = [IssueOut(**issue) for issue in error.get("issues") or []]
    answer = ErrorAnswer(
        int(error.get("status", 503)), str(error.get("detail") or f"the upload was {item.state}"), issues
    )
    return render_openai_error(answer)


@router.get("", response_model=FileList)
def list_files(
    user: CurrentUser,
    context: Context,
    purpose: str | None = Query(
        None, max_length=100, description="Only files of this purpose (only fine-tune has any)."
    ),
    limit: int = Query(10000, ge=1, le=10000),
    after: str | None = Query(None, max_length=40, description="The last file id of the previous page."),
    order: Order = Query("desc", description="By creation time: desc (newest first) or asc."),
) -> FileList:
    """The caller's files (every dataset version they own), a page at a time."""
    versions = [] if purpose not in (None, FILE_PURPOSE) else context.jobs.datasets.versions_owned_by(user.id)
    page, more = page_after(versions, after, limit, order)
    data = [file_out(version) for version in page]
    return FileList(
        data=data, has_more=more, first_id=data[0].id if data else None, last_id=data[-1].id if data else None
    )


@router.get("/{file_id}", response_model=FileOut)
def retrieve_file(file_id: str, user: CurrentUser, context: Context) -> FileOut:
    """One of the caller's files (another user's answers 404)."""
    return file_out(context.jobs.datasets.get_version(user, file_id))


@router.delete("/{file_id}", response_model=FileDeletedOut)
def delete_file(file_id: str, user: CurrentUser, context: Context) -> FileDeletedOut:
    """Delete a file: its dataset version's rows at once, its stored data by a worker (tunedeck's deletion).

    A file that trained or validated jobs is not deleted: 409 naming those jobs (delete them
    first, e.g. by deleting their fine-tuned models).
    """
    request_deletion(context.jobs, user, "dataset_version", file_id)
    return FileDeletedOut(id=file_id)


@router.get("/{file_id}/content", response_class=Response, responses={200: {"content": {"application/jsonl": {}}}})
def file_content(file_id: str, request: Request, user: CurrentUser, context: Context) -> Response:
    """The file's content as stored: tunedeck's canonical JSONL rows (after any column mapping or redaction),
    not the bytes as uploaded, which are not kept once ingested.

    A sealed test set answers 409 and data a retention policy deleted 410; each read is recorded
    in the owner's access log.
    """
    version = context.jobs.datasets.get_version(user, file_id)
    refuse_sealed_read(version)
    refuse_purged_read(context, user, version)
    content = context.artifacts.read_bytes(f"{version_prefix(version)}/{DATA_FILE}")
    record_read(
        context, request, user, owner_id=version.owner_id, object_kind="dataset_version", object_id=version.id,
        object_label=file_out(version).filename, action="download",
    )  # fmt: skip
    return Response(content, media_type="application/jsonl")
