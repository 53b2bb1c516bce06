"""Generation from a job's model (the playground) and exports (adapter, merged, bundle, mlx) of it.

Both are work items for a worker (`tunedeck.worker.work_handlers`): the API checks that
the job and its model exist and are the caller's, queues the item and answers 202 at
once (or after `wait` seconds). A finished export is committed under the job's
`exports/<format>-<final|step-N>` prefix, manifest last; identical export requests share
one item, whichever server processes they reach, so the export is built once.
Another user's job answers 404.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from tunedeck.api.access_records import record_read
from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.routes.deletions import DELETE_RESPONSES, deletion_accepted
from tunedeck.api.schemas.checkpoints import StoredFileOut
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.exports import ExportIn, ExportOut, GenerateIn
from tunedeck.api.work_answers import WAIT, WORK_RESPONSES, waited_answer
from tunedeck.service.exports.archive import prepare_archive
from tunedeck.service.exports.work_requests import queue_work
from tunedeck.service.jobs.job_models import (
    EXPORT_RECORD,
    export_name_for,
    export_prefix,
    label_for,
    list_export_names,
    locate_job_model,
)
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.storage.base import join_key

router = APIRouter(prefix="/jobs/{job_id}", tags=["exports"])
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
    422: {"model": ErrorOut},
}


@router.post("/generate", status_code=202, response_model=None, responses=WORK_RESPONSES)
async def generate(
    job_id: str, body: GenerateIn, request: Request, user: CurrentUser, context: Context, wait: float = WAIT
) -> Any:
    """Answer a prompt with the job's final model (or a committed checkpoint) and, beside it, the base model.

    A worker runs it; the item's result has the answers (`fine_tuned`, `base`) when it succeeded.
    """
    located = locate_job_model(context.jobs, context.artifacts, user, job_id, body.checkpoint)
    inputs = {
        "job_id": located.job_id,
        "step": body.checkpoint,
        "prompt": body.prompt,
        "messages": [message.model_dump() for message in body.messages] if body.messages is not None else None,
        "compare_base": body.compare_base,
        "max_new_tokens": body.max_new_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "do_sample": body.do_sample,
        "seed": body.seed,
    }
    item = queue_work(context, user, "generate", inputs, job_id=located.job_id)
    return await waited_answer(request, context, user, item, wait)


@router.post("/exports", status_code=202, response_model=None, responses=WORK_RESPONSES)
async def create_export(
    job_id: str, body: ExportIn, request: Request, user: CurrentUser, context: Context, wait: float = WAIT
) -> Any:
    """Export the final model or a committed checkpoint; the same export asked twice is built once.

    The item's result names the export (`name`); read it with `GET /jobs/{job_id}/exports/{name}`.
    """
    located = locate_job_model(context.jobs, context.artifacts, user, job_id, body.checkpoint)
    mlx = body.mlx_options()
    name = export_name_for(body.format, label_for(body.checkpoint), mlx)
    inputs: dict[str, Any] = {
        "job_id": located.job_id,
        "step": body.checkpoint,
        "format": body.format,
        "allow_base_mismatch": body.allow_base_mismatch,
        "max_shard_size": body.max_shard_size,
    }
    if mlx is not None:  # only then: the other formats' requests (and their identities) stay as they were
        inputs.update(mlx=mlx.to_dict(), unified_memory_gb=body.unified_memory_gb)
    identity = {"prefix": export_prefix(located.owner_id, located.job_id, name)}
    item = queue_work(context, user, "export", inputs, identity=identity, job_id=located.job_id)
    return await waited_answer(request, context, user, item, wait)


@router.get("/exports", response_model=list[ExportOut], responses=_ERRORS)
def list_exports(job_id: str, request: Request, user: CurrentUser, context: Context) -> list[ExportOut]:
    """The job's committed exports."""
    job = context.jobs.jobs.get(user, job_id)
    return [
        _export_out(request, context, job.id, name, export_prefix(job.owner_id, job.id, name))
        for name in list_export_names(context.artifacts, job.owner_id, job.id)
    ]


@router.get("/exports/{name}", response_model=ExportOut, responses=_ERRORS)
def get_export(job_id: str, name: str, request: Request, user: CurrentUser, context: Context) -> ExportOut:
    """One committed export."""
    job = context.jobs.jobs.get(user, job_id)
    return _export_out(request, context, job.id, name, export_prefix(job.owner_id, job.id, name))


@router.delete("/exports/{name}", status_code=202, response_model=None, responses=DELETE_RESPONSES)
def delete_export(job_id: str, name: str, user: CurrentUser, context: Context) -> JSONResponse:
    """Delete an export's stored files (asking for it again builds it anew); the receipt."""
    return deletion_accepted(request_deletion(context.jobs, user, "export", f"{job_id}/{name}"))


@router.get(
    "/exports/{name}/archive",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}}}, **_ERRORS},
)
def download_export(
    job_id: str, name: str, request: Request, user: CurrentUser, context: Context
) -> StreamingResponse:
    """A committed export as a zip archive (every checksum verified before the first byte); logged for its owner."""
    job = context.jobs.jobs.get(user, job_id)
    prefix = export_prefix(job.owner_id, job.id, name)
    if context.artifacts.read_manifest(prefix) is None:
        raise HTTPException(404, f"job {job.id!r} has no export {name!r}")
    prepared = prepare_archive(context.artifacts, prefix, context.scratch_dir)
    record_read(
        context, request, user, owner_id=job.owner_id, object_kind="export", object_id=job.id,
        object_label=f"export {name} of job {job.name}", action="download",
    )  # fmt: skip
    return StreamingResponse(
        prepared.chunks(),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{job.id}-{name}.zip"'},
        background=BackgroundTask(prepared.cleanup),
    )


def _export_out(request: Request, context: ApiContext, job_id: str, name: str, prefix: str) -> ExportOut:
    manifest = context.artifacts.read_manifest(prefix)
    if manifest is None:
        raise HTTPException(404, f"job {job_id!r} has no export {name!r}")
    record = json.loads(context.artifacts.read_bytes(join_key(prefix, EXPORT_RECORD)).decode("utf-8"))
    return ExportOut(
        name=name,
        format=str(record.get("export_format")),
        source=str(record.get("source")),
        contents=str(record.get("contents")),
        storage_prefix=prefix,
        archive_url=str(request.app.url_path_for("download_export", job_id=job_id, name=name)),
        files=[StoredFileOut(path=f.path, size=f.size, sha256=f.sha256) for f in manifest.files],
        total_bytes=manifest.total_bytes,
        pin=record.get("pin"),
        warnings=list(record.get("warnings") or []),
        mlx=record.get("mlx"),
    )
