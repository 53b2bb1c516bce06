"""A streamed generation's answer-so-far is written on its work item at most once per interval."""

from __future__ import annotations

from typing import Any

import pytest

from tunedeck.worker import work_handlers
from tunedeck.worker.work_handlers import partial_text_reporter


class Call:
    """A handler call that only records its progress reports."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def progress(self, phase: str, **detail: Any) -> None:
        self.reports.append({"phase": phase, **detail})


def test_reports_are_spaced_by_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(work_handlers.time, "monotonic", lambda: now[0])
    call = Call()
    report = partial_text_reporter(call, interval_s=2.0)  # type: ignore[arg-type]
    for step, text in enumerate(["a", "ab", "abc", "abcd", "abcde"]):
        now[0] = 100.0 + step
        report(text)
    # The first at once, then one per 2 s: what was skipped is a prefix of what came next.
    assert call.reports == [{"phase": "generating", "text": text} for text in ("a", "abc", "abcde")]
