"""Experiments pages: the list with a form for a new hypothesis, and one experiment's comparison of variants."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.api.experiment_sources import load_experiment_data
from tunedeck.api.routes.experiments import experiment_out
from tunedeck.core.errors import IssueListError
from tunedeck.eval.experiment_report import GUARDS_KEY
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup

router = APIRouter(include_in_schema=False)


@router.get("/experiments")
def experiments_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's experiments and the form that records a new one."""
    return _list_page(request, session, dashboard, error=None, status=200)


def _list_page(
    request: Request, session: SessionDep, dashboard: DashboardDep, *, error: str | None, status: int
) -> Response:
    experiments = [experiment_out(row) for row in dashboard.context.jobs.experiments.list(session.user)]
    return dashboard.renderer.page(
        request,
        "experiments.html",
        status,
        title="Experiments",
        nav="experiments",
        user=session.user,
        csrf_token=session.csrf,
        experiments=experiments,
        error=error,
    )


@router.post("/experiments")
def create_experiment(
    request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm
) -> Response:
    """Record a hypothesis with its guards (one per line); jobs join it from the job form or the API."""
    from tunedeck.eval.guards import parse_guards

    name = str(form.get("name") or "").strip()
    hypothesis = str(form.get("hypothesis") or "").strip()
    guards = [line.strip() for line in str(form.get("guards") or "").splitlines() if line.strip()]
    if not name:
        return _list_page(request, session, dashboard, error="name: give the experiment a name", status=422)
    try:
        parse_guards(guards)
    except IssueListError as error:
        return _list_page(request, session, dashboard, error=str(error), status=422)
    row = dashboard.context.jobs.experiments.create(
        session.user, name=name, hypothesis=hypothesis, reference_config={GUARDS_KEY: guards}
    )
    return RedirectResponse(f"/experiments/{row.id}", status_code=303)


@router.get("/experiments/{experiment_id}")
def experiment_page(experiment_id: str, request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """Variants with their state, config differences, metrics and deltas; the full report one click away."""
    from tunedeck.eval.experiment_report import build_comparison

    context = dashboard.context
    with page_lookup():
        experiment = experiment_out(context.jobs.experiments.get(session.user, experiment_id))
        comparison = build_comparison(
            load_experiment_data(context.jobs, context.artifacts, session.user, experiment_id)
        ).to_dict()
    return dashboard.renderer.page(
        request,
        "experiment.html",
        title=experiment.name,
        nav="experiments",
        user=session.user,
        csrf_token=session.csrf,
        experiment=experiment,
        comparison=comparison,
    )
