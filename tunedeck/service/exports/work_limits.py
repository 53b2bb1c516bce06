"""The bound on the model work one user may have waiting: beyond it a request is answered 429 at once."""

from __future__ import annotations

RETRY_AFTER_S = 5


class WorkQueueFull(Exception):
    """The caller already has as much model work queued or running as the server allows one user."""

    def __init__(self, detail: str, retry_after_s: int = RETRY_AFTER_S) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after_s = retry_after_s
