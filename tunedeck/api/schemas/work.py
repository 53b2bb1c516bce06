"""Work items as the API shows them: what a worker was asked to do, its progress, its result or its error."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from tunedeck.api.schemas.common import IssueOut
from tunedeck.core.states import WorkState

# The longest a request may wait for its work to end before it is answered 202.
WAIT_MAX_S = 120


class WorkErrorOut(BaseModel):
    """Why a work item failed: the HTTP status the request would have had, the detail, located issues."""

    status: int
    detail: str
    issues: list[IssueOut] = Field(default_factory=list)


class WorkItemOut(BaseModel):
    """A work item: queued, running (with what it is doing), or ended with its result or its error."""

    id: str
    kind: str = Field(
        description=(
            "`train` (a job's place in the queue: it ends when the job succeeds, pauses, fails or is cancelled), "
            "`export`, `preflight`, `inspect`, `generate` or `ingest`."
        )
    )
    state: WorkState
    job_id: str | None = None
    progress: dict[str, Any] = Field(default_factory=dict, description="`phase`: what the worker is doing now.")
    result: dict[str, Any] | None = Field(
        None,
        description=(
            "When succeeded: the export's name, the preflight report, the answers, the inspection, the ingested "
            "dataset version, or the state a job ended its attempt in (`job_state`). A generation's "
            "also says whether its model was already loaded on the worker (`model_cached`), the seconds spent "
            "loading it (`load_s`, 0 when cached) and its weights' bytes (`model_bytes`)."
        ),
    )
    error: WorkErrorOut | None = None
    attempt: int
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    url: str = Field(description="Where to read the item (`?wait=N` waits up to N seconds for its end).")
    events_url: str = Field(description="Server-sent events: the item each time it changes, then `end`.")
