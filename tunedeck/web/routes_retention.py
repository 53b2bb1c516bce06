"""Retention pages: the user-wide policy form (with the server's bounds) and a dataset's policy form.

A field left empty keeps things as long as the server allows (forever when it sets
no limit). A value outside the server's bounds re-renders the form with the reason.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tunedeck.api.schemas.retention import DAYS_MAX
from tunedeck.core.errors import ConfigError
from tunedeck.service.privacy.retention_dates import retention_bounds
from tunedeck.store.models import Dataset
from tunedeck.store.retention import POLICY_FIELDS, PolicyValues
from tunedeck.web.locales.catalogue import Message, marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup

router = APIRouter(include_in_schema=False)
FIELD_LABELS = {
    "raw_data_days": marked("Delete a dataset version's raw data this many days after its last use"),
    "checkpoint_days": marked(
        "Delete a finished job's checkpoints, except the best and the newest, after this many days"
    ),
    "job_days": marked("Delete a finished job entirely after this many days"),
}


class FormValueError(ValueError):
    """A form field that is not a whole number of days; `message` says so, for the page to translate."""

    def __init__(self, message: Message) -> None:
        super().__init__(message.text.format(**message.values))
        self.message = message


def policy_changes(form: FormData) -> dict[str, int | None]:
    """The three fields of a retention form: empty is None (as long as allowed); FormValueError names a bad one."""
    changes: dict[str, int | None] = {}
    for name in POLICY_FIELDS:
        text = str(form.get(name) or "").strip()
        if not text:
            changes[name] = None
            continue
        if not text.isdigit() or not 1 <= int(text) <= DAYS_MAX:
            raise FormValueError(
                Message(
                    marked("{field}: expected a whole number of days from 1 to {most}, found {found}"),
                    {"field": name, "most": DAYS_MAX, "found": repr(text[:20])},
                )
            )
        changes[name] = int(text)
    return changes


def _page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    *,
    dataset: Dataset | None = None,
    values: PolicyValues | None = None,
    notice: str | None = None,
    error: str | Message | None = None,
    status: int = 200,
) -> Response:
    repo = dashboard.context.jobs.retention
    if values is None:
        values = repo.dataset_policy(session.user, dataset.id) if dataset else repo.user_policy(session.user)
    title = Message(marked("Retention of dataset {name}"), {"name": dataset.name}) if dataset else marked("Retention")
    return dashboard.renderer.page(
        request,
        "retention.html",
        status_code=status,
        title=title,
        nav="account",
        user=session.user,
        csrf_token=session.csrf,
        dataset=dataset,
        policy=values,
        bounds=retention_bounds(dashboard.context),
        labels=FIELD_LABELS,
        notice=notice,
        error=error,
    )


@router.get("/account/retention")
def retention_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user-wide retention policy and the server's bounds."""
    saved = request.query_params.get("saved") == "1"
    return _page(request, session, dashboard, notice=marked("Your retention policy was saved.") if saved else None)


@router.post("/account/retention")
def save_retention(request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """Save the user-wide policy; an out-of-bounds or malformed value re-renders the form (422) saying why."""
    try:
        changes = policy_changes(form)
        dashboard.context.jobs.retention.set_user_policy(session.user, changes, retention_bounds(dashboard.context))
    except (FormValueError, ConfigError) as refused:
        return _page(request, session, dashboard, error=_reason(refused), status=422)
    return RedirectResponse("/account/retention?saved=1", status_code=303)


@router.post("/datasets/{dataset_id}/retention")
def save_dataset_retention(
    dataset_id: str, request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm
) -> Response:
    """Save one dataset's policy (another user's dataset is a 404 page), then back to the dataset page."""
    repo = dashboard.context.jobs
    with page_lookup():
        dataset = repo.datasets.get_dataset(session.user, dataset_id)
    try:
        changes = policy_changes(form)
        repo.retention.set_dataset_policy(session.user, dataset.id, changes, retention_bounds(dashboard.context))
    except (FormValueError, ConfigError) as refused:
        return _page(request, session, dashboard, dataset=dataset, error=_reason(refused), status=422)
    return RedirectResponse(f"/datasets/{dataset.id}?retention=saved", status_code=303)


def _reason(refused: Exception) -> str | Message:
    if isinstance(refused, FormValueError):
        return refused.message
    if isinstance(refused, ConfigError):
        return "; ".join(f"{issue.field}: {issue.message}" for issue in refused.issues)
    return str(refused)
