"""Experiments pages: the list with a form for a new hypothesis, and one experiment's comparison of variants."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError, Issue, IssueListError, NotFoundError
from tunedeck.eval.experiment_report import GUARDS_KEY
from tunedeck.service.plans.experiment_sources import load_experiment_data
from tunedeck.service.plans.experiments import experiment_out, pinned_reference
from tunedeck.service.plans.plan_sources import plan_out
from tunedeck.store.types import utcnow
from tunedeck.web.compare_view import compare_link_ids
from tunedeck.web.experiment_view import curve_plot, stat_tables
from tunedeck.web.locales.catalogue import marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup

router = APIRouter(include_in_schema=False)


@router.get("/experiments")
def experiments_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's experiments and the form that records a new one."""
    return _list_page(request, session, dashboard, errors={}, values={}, status=200)


def _list_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    *,
    errors: dict[str, str],
    values: dict[str, str],
    status: int,
) -> Response:
    experiments = [experiment_out(row) for row in dashboard.context.jobs.experiments.list(session.user)]
    return dashboard.renderer.page(
        request,
        "experiments.html",
        status,
        title=marked("Experiments"),
        nav="experiments",
        user=session.user,
        csrf_token=session.csrf,
        experiments=experiments,
        errors=errors,
        values=values,
    )


def parse_reference_config(text: str) -> dict[str, Any]:
    """The reference config typed in the form (a JSON object, empty for none), validated like a job's config.

    Only the keys written are kept, as the API stores them; IssueListError (a
    ConfigError) names what is wrong.
    """
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise ConfigError([Issue(f"not valid JSON: {error.msg} ({where})", field="reference_config")]) from None
    return validate_config(raw).model_dump(mode="json", exclude_unset=True)


@router.post("/experiments")
def create_experiment(request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """Record a hypothesis, its reference config and its guards (one per line); jobs join it from the job form."""
    from tunedeck.eval.guards import parse_guards

    values = {key: str(form.get(key) or "") for key in ("name", "hypothesis", "guards", "reference_config")}
    name = values["name"].strip()
    hypothesis = values["hypothesis"].strip()
    guards = [line.strip() for line in values["guards"].splitlines() if line.strip()]
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = marked("Give the experiment a name.")
    try:
        parse_guards(guards)
    except IssueListError as error:
        errors["guards"] = "; ".join(issue.render() for issue in error.issues) or str(error)
    reference: dict[str, Any] = {}
    try:
        reference = pinned_reference(
            dashboard.context, session.user, parse_reference_config(values["reference_config"])
        )
    except IssueListError as error:
        errors["reference_config"] = "; ".join(issue.render() for issue in error.issues) or str(error)
    except NotFoundError as error:  # the validation dataset it names is not the user's
        errors["reference_config"] = f"validation_dataset_id: {error}"
    if errors:
        return _list_page(request, session, dashboard, errors=errors, values=values, status=422)
    row = dashboard.context.jobs.experiments.create(
        session.user, name=name, hypothesis=hypothesis, reference_config={**reference, GUARDS_KEY: guards}
    )
    return RedirectResponse(f"/experiments/{row.id}", status_code=303)


@router.get("/experiments/{experiment_id}")
def experiment_page(experiment_id: str, request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """Variants with config differences and deltas (baseline and reference), per-class and per-field
    tables and the overlaid loss curves; the full report one click away; a rental plan's warning when its
    rental will end before the phases."""
    from tunedeck.eval.experiment_report import build_comparison

    context = dashboard.context
    with page_lookup():
        experiment = experiment_out(context.jobs.experiments.get(session.user, experiment_id))
        comparison = build_comparison(
            load_experiment_data(context.jobs, context.artifacts, session.user, experiment_id)
        ).to_dict()
        plans = [
            plan_out(context.jobs, session.user, row, utcnow())
            for row in context.jobs.plans.list(session.user, experiment_id=experiment_id)
        ]
    return dashboard.renderer.page(
        request,
        "experiment.html",
        title=experiment.name,
        nav="experiments",
        user=session.user,
        csrf_token=session.csrf,
        experiment=experiment,
        comparison=comparison,
        class_tables=stat_tables(comparison, "per_class"),
        field_tables=stat_tables(comparison, "per_field"),
        curves=curve_plot(comparison),
        plans=plans,
        compare_ids=compare_link_ids([variant["job_id"] for variant in comparison["variants"]]),
    )
