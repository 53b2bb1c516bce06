"""Running one claimed work item: its lease kept alive from a thread, its handler, its result or its error.

The error kept on a failed item says what an HTTP client would have been told had
the work run in the request: a status (404 unknown object, 403 not allowed, 409 the
adapter does not match its base, 422 refused input with located issues, 503 the
engine failed) and a detail.
"""

from __future__ import annotations

import logging
from typing import Any

from tunedeck.core.errors import ForbiddenError, IssueListError, NotFoundError
from tunedeck.core.states import WorkState
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.kind_policy import ItemEnd
from tunedeck.store.lease_keeper import LeaseKeeper
from tunedeck.store.work_queue import ClaimedWork
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.engine_process import EngineRefusedError, scratch_folder
from tunedeck.worker.sweeper import WORK_DIR, work_scratch_prefix
from tunedeck.worker.work_handlers import LostHoldError, WorkCall, handler_for

log = logging.getLogger(__name__)
# The engine's refusal when an adapter's recorded base differs from the job's base model: a conflict.
BASE_MISMATCH = "BaseModelMismatchError"
# An upload with more rows than the server accepts: too large, not malformed.
TOO_MANY_ROWS = "TooManyRowsError"


class WorkExecution:
    """One attempt at one work item on this worker."""

    def __init__(self, ctx: WorkerContext, claimed: ClaimedWork) -> None:
        self.ctx = ctx
        self.item = claimed

    def run(self) -> WorkState | None:
        """Do the work and record its end; None when the claim lapsed (another attempt owns the item)."""
        store, item = self.ctx.store, self.item
        keeper = LeaseKeeper(
            lambda: store.queue.heartbeat(item.item_id, item.fencing_token, self.ctx.lease_s),
            self.ctx.heartbeat_s,
            name=f"work-lease-{item.item_id}",
        ).start()
        try:
            result = self._result()
        except LostHoldError as error:
            log.warning("work item %s: %s", item.item_id, error)
            return None
        except Exception as error:
            failure = _failure(item.kind, error)
            if failure["status"] >= 500:
                log.exception("work item %s (%s) failed", item.item_id, item.kind)
            ended = store.queue.finish(item.item_id, item.fencing_token, ItemEnd.failed(failure))
            return WorkState.FAILED if ended else None
        finally:
            keeper.stop()
        ended = store.queue.finish(item.item_id, item.fencing_token, ItemEnd.succeeded(result))
        return WorkState.SUCCEEDED if ended else None

    def _result(self) -> dict[str, Any]:
        store, item = self.ctx.store, self.item
        owner = store.users.get_user(item.owner_id)
        # Named after the item, so a sweep can tell a running item's folder from a killed worker's.
        with scratch_folder(self.ctx.runs_dir / WORK_DIR, work_scratch_prefix(item.kind, item.item_id)) as folder:
            call = WorkCall(
                ctx=self.ctx,
                owner=owner,
                inputs=item.inputs,
                folder=folder,
                still_held=lambda: store.queue.still_held(item.item_id, item.fencing_token),
                progress=self._progress,
            )
            return handler_for(item.kind)(call)

    def _progress(self, phase: str, **detail: Any) -> None:
        """Record what the item is doing; `done`/`total` (when known) let clients draw a bar."""
        progress = {"phase": phase, **{key: value for key, value in detail.items() if value is not None}}
        self.ctx.store.queue.report_progress(self.item.item_id, self.item.fencing_token, progress)


def _failure(kind: str, error: Exception) -> dict[str, Any]:
    """The error kept on a failed item: an HTTP status, a detail and located issues where there are."""
    if isinstance(error, EngineRefusedError) and error.kind == BASE_MISMATCH:
        return {"status": 409, "detail": "; ".join(issue.message for issue in error.issues)}
    if isinstance(error, EngineRefusedError) and error.kind == TOO_MANY_ROWS:
        return {"status": 413, "detail": error.title}
    if isinstance(error, AlreadyExistsError):
        return {"status": 409, "detail": str(error)}
    if isinstance(error, IssueListError):
        return {"status": 422, "detail": error.title, "issues": [issue.to_dict() for issue in error.issues]}
    if isinstance(error, NotFoundError):
        return {"status": 404, "detail": str(error) or "not found"}
    if isinstance(error, ForbiddenError):
        return {"status": 403, "detail": str(error)}
    return {"status": 503, "detail": f"the {kind} failed on the worker: {error}"}
