"""Rental plan pages: the list with a form for a new plan, and one plan's chart, figures and tracking."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.api.schemas.plans import PlanCreate
from tunedeck.core.errors import IssueListError, NotFoundError, StateTransitionError
from tunedeck.planning.figures import DEFAULT_EFFICIENCY
from tunedeck.planning.peak_flops import DEVICE_TYPES, device_key
from tunedeck.planning.timeline import DEFAULT_MARGIN_SHARE
from tunedeck.service.plans.plan_sources import create_plan, plan_out
from tunedeck.store.types import utcnow
from tunedeck.web.locales.catalogue import Message, marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup
from tunedeck.web.plan_view import plan_chart

router = APIRouter(include_in_schema=False)

FORM_FIELDS = (
    "experiment_id", "device_type", "device_count", "worker_id", "variants", "train_rows", "validation_rows",
    "test_rows", "model_params", "tokens_per_row", "price_per_hour", "rental_days", "margin_share", "efficiency",
)  # fmt: skip
INTEGERS = ("device_count", "train_rows", "validation_rows", "test_rows", "tokens_per_row", "rental_days")
NUMBERS = ("model_params", "price_per_hour", "margin_share", "efficiency")


@router.get("/plans")
def plans_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's plans and the form that makes a new one."""
    defaults = {
        "device_count": "1",
        "margin_share": str(DEFAULT_MARGIN_SHARE),
        "efficiency": str(DEFAULT_EFFICIENCY),
        "experiment_id": request.query_params.get("experiment_id", ""),
    }
    return _list_page(request, session, dashboard, errors={}, values=defaults, status=200)


def _list_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    *,
    errors: dict[str, str | Message],
    values: dict[str, str],
    status: int,
) -> Response:
    store = dashboard.context.jobs
    now = utcnow()
    plans = [plan_out(store, session.user, row, now) for row in store.plans.list(session.user)]
    return dashboard.renderer.page(
        request,
        "plans.html",
        status,
        title=marked("Rental plans"),
        nav="plans",
        user=session.user,
        csrf_token=session.csrf,
        plans=plans,
        experiments=store.experiments.list(session.user),
        device_types=DEVICE_TYPES,
        errors=errors,
        values=values,
    )


def _variants(text: str) -> list[dict[str, Any]]:
    """One variant a line: `NAME` or `NAME:EPOCHS`."""
    variants: list[dict[str, Any]] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        name, colon, epochs = line.rpartition(":")
        if colon and epochs.strip().isdigit():
            variants.append({"name": name.strip(), "epochs": int(epochs)})
        else:
            variants.append({"name": line})
    return variants


def _request(values: dict[str, str], errors: dict[str, str | Message]) -> dict[str, Any]:
    """The API request the form describes; what cannot be read goes to `errors` by field."""
    body: dict[str, Any] = {"experiment_id": values["experiment_id"], "variants": _variants(values["variants"])}
    numbers: dict[str, Any] = {}
    for key in (*INTEGERS, *NUMBERS):
        text = values[key].strip()
        if not text:
            continue
        try:
            numbers[key] = int(text) if key in INTEGERS else float(text)
        except ValueError:
            expected = marked("Expected a whole number, found {found}.") if key in INTEGERS else marked(
                "Expected a number, found {found}."
            )
            errors[key] = Message(expected, {"found": repr(text)})
    if values["worker_id"].strip():
        body["machine"] = {"worker_id": values["worker_id"].strip()}
    else:
        device = device_key(values["device_type"]) if values["device_type"].strip() else None
        body["machine"] = {"device_type": device, "device_count": numbers.pop("device_count", 1)}
    numbers.pop("device_count", None)
    return body | numbers


def _field_errors(error: Exception) -> dict[str, str | Message]:
    """Messages by form field from a refused request."""
    from pydantic import ValidationError

    errors: dict[str, str | Message] = {}
    if isinstance(error, ValidationError):
        for item in error.errors(include_url=False):
            location = [str(part) for part in item["loc"]]
            key = location[-1] if location and location[0] == "machine" and len(location) > 1 else location[0]
            key = "device_type" if location == ["machine"] else key
            errors.setdefault(key if key in FORM_FIELDS else "form", str(item["msg"]))
    elif isinstance(error, IssueListError):
        for issue in error.issues:
            key = (issue.field or "form").split(".")[-1]
            text = issue.message + (f" (expected {issue.expected})" if issue.expected else "")
            errors.setdefault(key if key in FORM_FIELDS else "form", text)
    return errors


@router.post("/plans")
def create_plan_page(request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """Plan a rental from the form; the page names each field to fix."""
    from pydantic import ValidationError

    values = {key: str(form.get(key) or "") for key in FORM_FIELDS}
    errors: dict[str, str | Message] = {}
    body = _request(values, errors)
    if not errors:
        try:
            request_body = PlanCreate.model_validate(body)
            row = create_plan(dashboard.context.jobs, dashboard.context.artifacts, session.user, request_body)
            return RedirectResponse(f"/plans/{row.id}", status_code=303)
        except (ValidationError, IssueListError) as error:
            errors = _field_errors(error) or {"form": str(error)}
        except NotFoundError as error:
            errors = {"experiment_id": str(error)}
    return _list_page(request, session, dashboard, errors=errors, values=values, status=422)


@router.get("/plans/{plan_id}")
def plan_page(plan_id: str, request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The phases over days, the rentals they fit, the figures and their sources, and the tracking once started."""
    store = dashboard.context.jobs
    with page_lookup():
        plan = plan_out(store, session.user, store.plans.get(session.user, plan_id), utcnow())
        experiment = store.experiments.get(session.user, plan.experiment_id)
    document = plan.model_dump(mode="json")
    return dashboard.renderer.page(
        request,
        "plan.html",
        title=plan.name,
        nav="plans",
        user=session.user,
        csrf_token=session.csrf,
        plan=document,
        experiment=experiment,
        chart=plan_chart(document),
    )


@router.post("/plans/{plan_id}/start")
def start_plan_page(plan_id: str, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """The rental starts now; a second start changes nothing."""
    # Started already: the page shows since when.
    with page_lookup(), suppress(StateTransitionError):
        dashboard.context.jobs.plans.start(session.user, plan_id)
    return RedirectResponse(f"/plans/{plan_id}", status_code=303)
