"""The access log: every read of the caller's raw data (previews, test set reads, downloads), newest first."""

from __future__ import annotations

from fastapi import APIRouter, Query

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.access_log import AccessLogEntryOut, AccessLogPage
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.store.models import AccessLogEntry

router = APIRouter(prefix="/access-log", tags=["access log"])


def entry_out(entry: AccessLogEntry) -> AccessLogEntryOut:
    """The wire form of a log entry."""
    return AccessLogEntryOut.model_validate(entry, from_attributes=True)


@router.get("", response_model=AccessLogPage, responses={404: {"model": ErrorOut}})
def list_access_log(
    user: CurrentUser,
    context: Context,
    owner: str | None = Query(None, max_length=40, description="Admins: the user whose log to read."),
    limit: int = Query(50, ge=1, le=200),
    cursor: str | None = Query(None, pattern=r"^[0-9]{1,15}$", description="next_cursor of the previous page."),
) -> AccessLogPage:
    """Who read the caller's data, which object, how and when, newest first, one page at a time.

    An admin may pass `owner` to read one user's log; anyone else naming another user gets 404.
    """
    page = context.jobs.access_log.list(user, owner_id=owner, limit=limit, cursor=cursor)
    return AccessLogPage(items=[entry_out(entry) for entry in page.items], next_cursor=page.next_cursor)
