"""`GET /jobs/{id}/report`: the final report of one job, as the experiment method asks it be delivered.

Model or adapter reference, configuration, baseline-vs-final results, guard verdicts
(the job's own guards, its experiment's, and any passed as `guard`), sealed-test
evaluations and observed limits, as JSON or Markdown.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.experiments import CompactGuards
from tunedeck.service.plans.experiment_sources import job_report_inputs

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.get(
    "/{job_id}/report",
    response_model=None,
    responses={
        200: {"content": {"application/json": {}, "text/markdown": {}}},
        404: {"model": ErrorOut},
        422: {"model": ErrorOut},
    },
)
def job_report(
    job_id: str,
    user: CurrentUser,
    context: Context,
    guard: Annotated[
        CompactGuards, Query(default_factory=list, description="Extra guard, e.g. 'json_valid_rate >= baseline'.")
    ],
    format: Literal["json", "markdown"] = Query("json"),
) -> Any:
    """The job's deliverable summary; `limits.guard_violations` lists every guard the final model broke."""
    from tunedeck.eval.job_report import build_job_report

    report = build_job_report(**job_report_inputs(context.jobs, context.artifacts, user, job_id, guards=guard))
    if format == "markdown":
        return Response(report.to_markdown(), media_type="text/markdown; charset=utf-8")
    return report.to_dict()
