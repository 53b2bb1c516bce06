"""Workers embedded in the API process (`tunedeck serve --workers N`)."""

from __future__ import annotations

import threading

from tunedeck.core.settings import Settings
from tunedeck.worker.supervisor import Worker, build_context


def run_embedded_workers(settings: Settings, count: int, stop_event: threading.Event) -> None:
    """Run one claim loop with `count` concurrent job slots until `stop_event` is set.

    Stopping drains: running jobs write a checkpoint and go back to the queue, so
    restarting the server resumes them instead of losing their progress.
    """
    ctx = build_context(settings, max_concurrent_jobs=count)

    def _bridge() -> None:
        stop_event.wait()
        ctx.drain.set()
        ctx.stop.set()

    threading.Thread(target=_bridge, name="embedded-worker-stop", daemon=True).start()
    try:
        Worker(ctx).run_forever()
    finally:
        ctx.store.close()
