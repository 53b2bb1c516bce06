"""Experiments: create, list, read, delete, and the comparison of their variants (JSON, HTML, Markdown)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Response, status

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.experiments import ExperimentCreate, ExperimentOut, VariantNoteIn
from tunedeck.config.loading import validate_config
from tunedeck.eval.experiment_report import GUARDS_KEY, NOTES_KEY
from tunedeck.eval.guards import parse_guards
from tunedeck.service.plans.experiment_sources import load_experiment_data
from tunedeck.service.plans.experiments import experiment_out, pinned_reference

router = APIRouter(prefix="/experiments", tags=["experiments"])
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}


@router.post(
    "",
    response_model=ExperimentOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        404: {"model": ErrorOut, "description": "The reference's validation dataset is not the caller's."},
        409: {"model": ErrorOut, "description": "An experiment of that name exists."},
    },
)
def create_experiment(body: ExperimentCreate, user: CurrentUser, context: Context) -> ExperimentOut:
    """Record a hypothesis and its reference config; 422 names a bad config key or guard.

    A validation dataset named by dataset id (`ds_...`) is kept as its newest version's id,
    the form a job's config stores, so variants compare against the very rows they evaluate on.
    """
    reference = validate_config(body.reference_config).model_dump(mode="json", exclude_unset=True)
    parse_guards(body.guards)
    reference = pinned_reference(context, user, reference)
    row = context.jobs.experiments.create(
        user,
        name=body.name,
        hypothesis=body.hypothesis,
        reference_config={**reference, GUARDS_KEY: body.guards},
    )
    return experiment_out(row)


@router.put(
    "/{experiment_id}/variants/{job_id}/note",
    response_model=ExperimentOut,
    responses=_404,
)
def set_variant_note(
    experiment_id: str, job_id: str, body: VariantNoteIn, user: CurrentUser, context: Context
) -> ExperimentOut:
    """Say why a variant changes what it changes; the comparison shows it and stops warning about several
    groups of keys changed at once. 404 when the job is not a variant of the caller's experiment."""
    row = context.jobs.experiments.set_variant_note(user, experiment_id, job_id, body.note, key=NOTES_KEY)
    return experiment_out(row)


@router.get("", response_model=list[ExperimentOut])
def list_experiments(user: CurrentUser, context: Context) -> list[ExperimentOut]:
    """The caller's experiments."""
    return [experiment_out(row) for row in context.jobs.experiments.list(user)]


@router.get("/{experiment_id}", response_model=ExperimentOut, responses=_404)
def get_experiment(experiment_id: str, user: CurrentUser, context: Context) -> ExperimentOut:
    """One experiment; 404 when it is not the caller's."""
    return experiment_out(context.jobs.experiments.get(user, experiment_id))


@router.delete("/{experiment_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_404)
def delete_experiment(experiment_id: str, user: CurrentUser, context: Context) -> Response:
    """Delete an experiment (its jobs stay, no longer grouped)."""
    context.jobs.experiments.delete(user, experiment_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{experiment_id}/comparison",
    response_model=None,
    responses={200: {"content": {"application/json": {}, "text/html": {}, "text/markdown": {}}}, **_404},
)
def compare_experiment(
    experiment_id: str,
    user: CurrentUser,
    context: Context,
    format: Literal["json", "html", "markdown"] = Query("json"),
    reference_job_id: str | None = Query(None, description="The variant others are compared to."),
) -> Any:
    """Variants × metrics with deltas against the baseline and the reference, config differences,
    per-class and per-field tables, loss curves and guard results; HTML is one self-contained file."""
    from tunedeck.eval.comparison_render import comparison_html, comparison_markdown
    from tunedeck.eval.experiment_report import build_comparison

    data = load_experiment_data(context.jobs, context.artifacts, user, experiment_id, reference_job_id=reference_job_id)
    comparison = build_comparison(data)
    if format == "html":
        return Response(comparison_html(comparison), media_type="text/html; charset=utf-8")
    if format == "markdown":
        return Response(comparison_markdown(comparison), media_type="text/markdown; charset=utf-8")
    return comparison.to_dict()
