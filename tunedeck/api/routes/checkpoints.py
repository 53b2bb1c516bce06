"""Checkpoints and the final model of a job: list, inspect, download as a zip or file by file.

Downloads read only committed folders (manifest present) and verify every
checksum. On S3, `?redirect=true` on a file answers with a short-lived
presigned URL instead of proxying the bytes. Every download is recorded in
the job owner's access log, with the reader (an admin reading another user's
job is the reader).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParameter
from fastapi.responses import FileResponse, RedirectResponse, StreamingResponse
from starlette.background import BackgroundTask

from tunedeck.api.access_records import record_read
from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.schemas.checkpoints import CheckpointDetailOut, CheckpointOut, StoredFileOut
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.service.exports.archive import prepare_archive
from tunedeck.storage.base import Manifest, final_prefix, join_key
from tunedeck.store.checkpoints import COMMITTED
from tunedeck.store.models import Checkpoint

router = APIRouter(prefix="/jobs/{job_id}", tags=["checkpoints"])
StepPath = Annotated[int, PathParameter(ge=0, le=SQL_INT_MAX, description="The checkpoint's training step.")]
PRESIGNED_SECONDS = 300
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}
_ZIP: dict[int | str, dict[str, Any]] = {200: {"content": {"application/zip": {}}}, **_404}
_FILE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "The file's bytes."},
    307: {"description": "With `redirect=true` on S3: the file at a presigned URL (`Location`)."},
    **_404,
}


def checkpoint_out(row: Checkpoint) -> CheckpointOut:
    """The wire form of a checkpoint row."""
    return CheckpointOut(
        step=row.step,
        state=row.state,
        committed=row.state == COMMITTED,
        is_best=row.is_best,
        metrics=row.metrics or {},
        manifest_sha256=row.manifest_sha256,
        created_at=row.created_at,
        committed_at=row.committed_at,
    )


def _committed_prefix(context: ApiContext, user: Principal, job_id: str, step: int) -> str:
    row = context.jobs.checkpoints.get(user, job_id, step)
    if row.state != COMMITTED:
        raise HTTPException(404, f"checkpoint {step} of job {job_id!r} is not committed yet")
    return row.storage_prefix


def _final_prefix(context: ApiContext, user: Principal, job_id: str) -> str:
    job = context.jobs.jobs.get(user, job_id)
    return final_prefix(job.owner_id, job.id)


def _record_download(
    context: ApiContext, request: Request, user: Principal, job_id: str, object_kind: str, what: str
) -> None:
    """Log the download in the job owner's access log (after the files were found: a 404 read nothing)."""
    job = context.jobs.jobs.get(user, job_id)
    record_read(
        context, request, user, owner_id=job.owner_id, object_kind=object_kind, object_id=job.id,
        object_label=f"{what} of job {job.name}", action="download",
    )  # fmt: skip


def _manifest(context: ApiContext, prefix: str) -> Manifest:
    manifest = context.artifacts.read_manifest(prefix)
    if manifest is None:
        raise HTTPException(404, "no committed files here")
    return manifest


def _zip_response(context: ApiContext, prefix: str, filename: str) -> StreamingResponse:
    prepared = prepare_archive(context.artifacts, prefix, context.scratch_dir)
    return StreamingResponse(
        prepared.chunks(),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        # Also runs when the client goes away before the generator starts.
        background=BackgroundTask(prepared.cleanup),
    )


def _file_response(context: ApiContext, prefix: str, path: str, redirect: bool) -> FileResponse | RedirectResponse:
    entry = _manifest(context, prefix).entry(path)
    if entry is None:  # only manifest paths are served: nothing outside the folder is reachable
        raise HTTPException(404, f"no file {path!r} here")
    key = join_key(prefix, entry.path)
    if redirect:
        url = context.artifacts.presigned_url(key, PRESIGNED_SECONDS)
        if url is not None:
            return RedirectResponse(url, status_code=307)
    context.scratch_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="file-", dir=context.scratch_dir))
    try:
        local = context.artifacts.get_file(key, scratch / "content")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return FileResponse(
        local,
        filename=Path(entry.path).name,
        media_type="application/octet-stream",
        background=BackgroundTask(shutil.rmtree, scratch, ignore_errors=True),
    )


@router.get("/checkpoints", response_model=list[CheckpointOut], responses=_404)
def list_checkpoints(job_id: str, user: CurrentUser, context: Context) -> list[CheckpointOut]:
    """Every checkpoint of a job, by step (written ones are not downloadable yet)."""
    return [checkpoint_out(row) for row in context.jobs.checkpoints.list_for_job(user, job_id)]


@router.get("/checkpoints/{step}", response_model=CheckpointDetailOut, responses=_404)
def get_checkpoint(job_id: str, step: StepPath, user: CurrentUser, context: Context) -> CheckpointDetailOut:
    """One checkpoint; committed ones list their files."""
    row = context.jobs.checkpoints.get(user, job_id, step)
    detail = CheckpointDetailOut(**checkpoint_out(row).model_dump())
    if row.state == COMMITTED:
        manifest = _manifest(context, row.storage_prefix)
        detail.files = [StoredFileOut(path=f.path, size=f.size, sha256=f.sha256) for f in manifest.files]
        detail.total_bytes = manifest.total_bytes
    return detail


@router.get("/checkpoints/{step}/archive", response_class=StreamingResponse, responses=_ZIP)
def download_checkpoint(
    job_id: str, step: StepPath, request: Request, user: CurrentUser, context: Context
) -> StreamingResponse:
    """A committed checkpoint as a zip archive (checksums verified before the first byte)."""
    prefix = _committed_prefix(context, user, job_id, step)
    response = _zip_response(context, prefix, f"{job_id}-checkpoint-{step}.zip")
    _record_download(context, request, user, job_id, "checkpoint", f"checkpoint {step}")
    return response


@router.get("/checkpoints/{step}/files/{path:path}", response_model=None, responses=_FILE)
def download_checkpoint_file(
    job_id: str,
    step: StepPath,
    path: str,
    request: Request,
    user: CurrentUser,
    context: Context,
    redirect: bool = Query(False, description="On S3: answer 307 to a presigned URL valid for 5 minutes."),
) -> FileResponse | RedirectResponse:
    """One file of a committed checkpoint."""
    response = _file_response(context, _committed_prefix(context, user, job_id, step), path, redirect)
    _record_download(context, request, user, job_id, "checkpoint", f"{path} of checkpoint {step}")
    return response


@router.get("/final", response_model=list[StoredFileOut], responses=_404)
def list_final(job_id: str, user: CurrentUser, context: Context) -> list[StoredFileOut]:
    """The files of the job's final model or adapter, once committed."""
    manifest = _manifest(context, _final_prefix(context, user, job_id))
    return [StoredFileOut(path=f.path, size=f.size, sha256=f.sha256) for f in manifest.files]


@router.get("/final/archive", response_class=StreamingResponse, responses=_ZIP)
def download_final(job_id: str, request: Request, user: CurrentUser, context: Context) -> StreamingResponse:
    """The final model or adapter as a zip archive."""
    prefix = _final_prefix(context, user, job_id)
    _manifest(context, prefix)
    response = _zip_response(context, prefix, f"{job_id}-final.zip")
    _record_download(context, request, user, job_id, "final_model", "final model")
    return response


@router.get("/final/files/{path:path}", response_model=None, responses=_FILE)
def download_final_file(
    job_id: str,
    path: str,
    request: Request,
    user: CurrentUser,
    context: Context,
    redirect: bool = Query(False, description="On S3: answer 307 to a presigned URL valid for 5 minutes."),
) -> FileResponse | RedirectResponse:
    """One file of the final model or adapter."""
    response = _file_response(context, _final_prefix(context, user, job_id), path, redirect)
    _record_download(context, request, user, job_id, "final_model", f"{path} of the final model")
    return response
