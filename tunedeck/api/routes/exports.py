"""Generation from a job's model (the playground) and exports (adapter, merged, bundle) of it.

Both fetch the committed model folder from storage into a scratch folder and run the
engine in a child process (`tunedeck.engine.generation`, `tunedeck.engine.export`); the
API itself never loads a model. A finished export is committed under the job's
`exports/<format>-<final|step-N>` prefix, manifest last, and later requests for the same
export reuse it; identical requests at the same time build it once, whichever server
processes they reach (`tunedeck.api.build_locks`).
Another user's job answers 404.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from tunedeck.api.archive import prepare_archive
from tunedeck.api.auth import CurrentUser
from tunedeck.api.build_locks import BuildHold
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.engine_process import EngineRefusedError, run_engine_module, scratch_folder
from tunedeck.api.export_sources import (
    EXPORT_RECORD,
    JobModel,
    export_prefix,
    fetch_job_model,
    label_for,
    list_export_names,
    locate_job_model,
)
from tunedeck.api.schemas.checkpoints import StoredFileOut
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.exports import ExportIn, ExportOut, GenerateIn, GenerateOut
from tunedeck.storage.base import join_key

router = APIRouter(prefix="/jobs/{job_id}", tags=["exports"])
GENERATE_TIMEOUT_S = 600.0
EXPORT_TIMEOUT_S = 3600.0
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
    422: {"model": ErrorOut},
}


def _scratch(context: ApiContext, prefix: str) -> AbstractContextManager[Path]:
    return scratch_folder(context.scratch_dir, prefix)


def _run(module: str, spec: dict[str, Any], folder: Path, timeout_s: float) -> dict[str, Any]:
    try:
        return run_engine_module(module, spec, folder, timeout_s=timeout_s)
    except EngineRefusedError as error:
        if error.kind == "BaseModelMismatchError":
            # The job's base model no longer matches what the adapter was trained on: a conflict, not bad input.
            raise HTTPException(status.HTTP_409_CONFLICT, "; ".join(i.message for i in error.issues)) from None
        raise


@router.post("/generate", response_model=GenerateOut, responses=_ERRORS)
def generate(job_id: str, body: GenerateIn, user: CurrentUser, context: Context) -> GenerateOut:
    """Answer a prompt with the job's final model (or a committed checkpoint) and, beside it, the base model."""
    located = locate_job_model(context.jobs, context.artifacts, user, job_id, body.checkpoint)
    with _scratch(context, "generate-") as folder:
        spec = fetch_job_model(context.artifacts, located, folder)
        spec.update(
            prompt=body.prompt,
            messages=[message.model_dump() for message in body.messages] if body.messages is not None else None,
            compare_base=body.compare_base,
            max_new_tokens=body.max_new_tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            do_sample=body.do_sample,
            seed=body.seed,
        )
        with context.engine_slots.hold(user.id, "generation"):
            result = _run("generation", spec, folder, GENERATE_TIMEOUT_S)
    return GenerateOut(job_id=located.job_id, **result)


@router.post("/exports", response_model=ExportOut, status_code=status.HTTP_201_CREATED, responses=_ERRORS)
def create_export(job_id: str, body: ExportIn, request: Request, user: CurrentUser, context: Context) -> ExportOut:
    """Export the final model or a committed checkpoint; committed to storage, or the existing export reused."""
    located = locate_job_model(context.jobs, context.artifacts, user, job_id, body.checkpoint)
    name = f"{body.format}-{label_for(body.checkpoint)}"
    prefix = export_prefix(located.owner_id, located.job_id, name)
    if context.artifacts.read_manifest(prefix) is None:
        with context.export_locks.hold(prefix) as hold:
            # A request for the same export may have built it while this one waited: reuse it.
            if context.artifacts.read_manifest(prefix) is None:
                _build_export(context, user.id, located, body, hold)
    return _export_out(request, context, located.job_id, name, prefix)


def _build_export(context: ApiContext, user_id: str, located: JobModel, body: ExportIn, hold: BuildHold) -> None:
    """Run the export engine on the fetched model and commit its output under the held prefix."""
    with _scratch(context, "export-") as folder:
        spec = fetch_job_model(context.artifacts, located, folder)
        spec.update(
            format=body.format,
            out=str(folder / "out"),
            allow_base_mismatch=body.allow_base_mismatch,
            max_shard_size=body.max_shard_size,
        )
        with context.engine_slots.hold(user_id, "export"):
            _run("export", spec, folder, EXPORT_TIMEOUT_S)
        if hold.lost.is_set():
            # Our lease lapsed (the database was out of reach for longer than its lifetime) and
            # another process may be building into the same prefix: committing now could mix files.
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                f"export {hold.key!r} was taken over by another server while it was built; retry the request",
            )
        context.artifacts.commit_directory(folder / "out", hold.key)


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


@router.get(
    "/exports/{name}/archive",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}}}, **_ERRORS},
)
def download_export(job_id: str, name: str, user: CurrentUser, context: Context) -> StreamingResponse:
    """A committed export as a zip archive (every checksum verified before the first byte)."""
    job = context.jobs.jobs.get(user, job_id)
    prefix = export_prefix(job.owner_id, job.id, name)
    if context.artifacts.read_manifest(prefix) is None:
        raise HTTPException(404, f"job {job.id!r} has no export {name!r}")
    prepared = prepare_archive(context.artifacts, prefix, context.scratch_dir)
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
    )
