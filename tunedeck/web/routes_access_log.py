"""The "Access log" page: who read the user's data (dataset previews, test set reads, downloads), newest first."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from tunedeck.web.locales.catalogue import marked
from tunedeck.web.page_deps import DashboardDep, SessionDep

router = APIRouter(include_in_schema=False)
PAGE_SIZE = 50
OBJECT_KIND_NAMES = {
    "dataset_version": marked("dataset"),
    "test_set": marked("sealed test set"),
    "export": marked("export"),
    "checkpoint": marked("checkpoint"),
    "final_model": marked("final model"),
}
ACTION_NAMES = {"download": marked("download"), "preview": marked("preview"), "read": marked("read")}
VIA_NAMES = {"api": marked("API"), "web": marked("dashboard"), "cli": marked("command line")}


@router.get("/account/access-log")
def access_log_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    cursor: str | None = Query(None, pattern=r"^[0-9]{1,15}$"),
) -> Response:
    """One page of reads of the signed-in user's data: reader, object, action, way in, time."""
    page = dashboard.context.jobs.access_log.list(session.user, limit=PAGE_SIZE, cursor=cursor)
    return dashboard.renderer.page(
        request,
        "access_log.html",
        title=marked("Access log"),
        nav="access-log",
        user=session.user,
        csrf_token=session.csrf,
        entries=page.items,
        next_cursor=page.next_cursor,
        kind_names=OBJECT_KIND_NAMES,
        action_names=ACTION_NAMES,
        via_names=VIA_NAMES,
    )
