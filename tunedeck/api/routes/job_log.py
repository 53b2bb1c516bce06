"""A job's whole log as a text file, streamed from its events."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.service.jobs.job_log import log_lines

router = APIRouter(prefix="/jobs/{job_id}", tags=["events"])


@router.get(
    "/log.txt",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/plain": {}}}, 404: {"model": ErrorOut}},
)
def download_log(job_id: str, user: CurrentUser, context: Context) -> StreamingResponse:
    """Every log line of the job, oldest first, as a `job-<id>.log` attachment (`<time> <level> <message>`)."""
    context.jobs.jobs.get(user, job_id)  # another user's job is a plain 404, before anything is streamed

    def lines() -> Iterator[bytes]:
        for line in log_lines(context.jobs.telemetry, user, job_id):
            yield (line.text() + "\n").encode("utf-8")

    return StreamingResponse(
        lines(),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="job-{job_id}.log"', "Cache-Control": "no-store"},
    )
