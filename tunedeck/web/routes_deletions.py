"""Deleting from the dashboard: a confirmation page for a dataset, a job or an export, then the receipt.

The confirmation of a dataset that trained models lists them and offers to delete them
too; without that box ticked the deletion is refused, as the API refuses it. Receipts
(what was removed where) are listed under the user's menu.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.core.errors import StateTransitionError
from tunedeck.service.jobs.job_parents import started_from
from tunedeck.service.privacy.deletion_plan import TrainedModelsError, plan_deletion, request_deletion
from tunedeck.store.models import Job
from tunedeck.web.locales.catalogue import Message, marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, PageNotFound, SessionDep, page_lookup

router = APIRouter(include_in_schema=False)
TARGET_MAX = 300
KINDS = ("dataset", "job", "export")  # what the dashboard deletes (admins delete users through the API or CLI)
KIND_PATTERN = f"^({'|'.join(KINDS)})$"
TRAINED_MODELS_NOTICE = marked(
    "The models listed below were trained on this dataset or started from this job's model: tick the box to delete them too, or delete them first."  # noqa: E501 (one message)
)
CONFIRM_TITLES = {
    "dataset": marked("Delete dataset {name}?"),
    "job": marked("Delete job {name}?"),
    "export": marked("Delete export {name}?"),
}
# A receipt's heading by what it deleted (every kind of deletion target, as the API and the CLI delete them too).
RECEIPT_TITLES = {
    "dataset": marked("dataset {name}"),
    "dataset_version": marked("dataset version {name}"),
    "job": marked("job {name}"),
    "export": marked("export {name}"),
    "user": marked("user {name}"),
}
# The words of a receipt the page translates where it shows them (`_(r.state)`); a listed model's state
# is a job's (tunedeck.web.locales.job_states).
RECEIPT_WORDS = (marked("pending"), marked("done"), marked("failed"), marked("retention"))


def _back_to(kind: str, target: str) -> str:
    """The page the object was deleted from (cancelling goes back there)."""
    if kind == "dataset":
        return f"/datasets/{target}"
    return f"/jobs/{target.partition('/')[0]}"


def _confirm_page(
    request: Request, session: SessionDep, dashboard: DashboardDep, kind: str, target: str,
    *, error: str | None = None, status: int = 200,
) -> Response:
    store = dashboard.context.jobs
    models: list[Job] = []
    with page_lookup():
        try:
            # Planned with the models, to list them; nothing is removed until the form is sent.
            order = plan_deletion(store, session.user, kind, target, with_models=True)
            label = order.target_label
            trained = store.deletions.jobs_trained_on(list(order.rows.version_ids))
            # For a job: the jobs that started from its model; for data: those trained on it, and their children.
            roots = [store.jobs.get(session.user, order.target_id)] if kind == "job" else trained
            models = [*trained, *started_from(store, roots)]
        except StateTransitionError as refused:
            label, error, status = target, str(refused), 409
    return dashboard.renderer.page(
        request,
        "deletion_confirm.html",
        status_code=status,
        title=Message(CONFIRM_TITLES[kind], {"name": label}),
        nav="deletions",
        user=session.user,
        csrf_token=session.csrf,
        kind=kind,
        target=target,
        label=label,
        models=models,
        back=_back_to(kind, target),
        error=error,
    )


@router.get("/deletions/confirm")
def confirm_deletion(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    kind: str = Query(..., pattern=KIND_PATTERN),
    target: str = Query(..., min_length=1, max_length=TARGET_MAX),
) -> Response:
    """What deleting the object removes, and the button that does it."""
    return _confirm_page(request, session, dashboard, kind, target)


@router.post("/deletions")
def delete_from_form(request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """Delete what the confirmation page names, then show the receipt."""
    kind, target = str(form.get("kind") or ""), str(form.get("target") or "")
    if kind not in KINDS or not target or len(target) > TARGET_MAX:
        raise PageNotFound()
    with_models = form.get("with_models") == "1"
    with page_lookup():
        try:
            receipt = request_deletion(dashboard.context.jobs, session.user, kind, target, with_models=with_models)
        except TrainedModelsError:
            error = TRAINED_MODELS_NOTICE
            return _confirm_page(request, session, dashboard, kind, target, error=error, status=409)
        except StateTransitionError as refused:
            return _confirm_page(request, session, dashboard, kind, target, error=str(refused), status=409)
    return RedirectResponse(f"/deletions/{receipt.id}", status_code=303)


@router.get("/deletions")
def deletions_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's deletion receipts, newest first."""
    return _receipts_page(request, session, dashboard, None)


@router.get("/deletions/{deletion_id}")
def deletion_page(deletion_id: str, request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """One receipt (another user's is a 404 page), above the others."""
    with page_lookup():
        shown = dashboard.context.jobs.deletions.get(session.user, deletion_id)
    return _receipts_page(request, session, dashboard, shown.id)


def _receipts_page(request: Request, session: SessionDep, dashboard: DashboardDep, shown: str | None) -> Response:
    return dashboard.renderer.page(
        request,
        "deletions.html",
        title=marked("Deletions"),
        nav="deletions",
        user=session.user,
        csrf_token=session.csrf,
        receipts=dashboard.context.jobs.deletions.list_receipts(session.user),
        kind_titles=RECEIPT_TITLES,
        shown=shown,
    )
