"""A job's log: its `log` events as lines of text, read from the events table a batch at a time.

The full-log page and the log download both read it this way, so a long log is never held
in memory as a whole: the download streams it, the page keeps only the lines it shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from tunedeck.store.access import Actor
from tunedeck.store.models import JobEvent
from tunedeck.store.telemetry import TelemetryRepository

LOG_EVENT = "log"
BATCH = 1000  # log events read per query
LEVELS = ("info", "warning", "error")  # what the engine writes; other levels a run writes are offered too


@dataclass(frozen=True)
class LogLine:
    """One line of a job's log."""

    time: datetime | None
    level: str
    message: str

    @classmethod
    def from_event(cls, event: JobEvent) -> LogLine:
        """The line a `log` event stands for (level `info` when it names none)."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        return cls(event.time, str(payload.get("level") or "info"), str(payload.get("message") or ""))

    @property
    def stamp(self) -> str:
        """When it was written, to the second, in UTC."""
        if self.time is None:
            return "-"
        aware = self.time if self.time.tzinfo is not None else self.time.replace(tzinfo=UTC)
        return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def text(self) -> str:
        """The line as the downloaded log file holds it (one line: newlines in a message are escaped)."""
        return f"{self.stamp} {self.level} {self.message}".replace("\r", "\\r").replace("\n", "\\n")

    def matches(self, query: str, level: str | None) -> bool:
        """Whether the line is at `level` (any when None) and holds `query` in any case (any line when empty)."""
        if level and self.level != level:
            return False
        return not query or query.casefold() in self.message.casefold()


def log_lines(telemetry: TelemetryRepository, actor: Actor, job_id: str) -> Iterator[LogLine]:
    """Every log line of one of `actor`'s jobs, oldest first, read `BATCH` events at a time.

    NotFoundError (at the first line) when the job is not `actor`'s.
    """
    after = 0
    while True:
        events = telemetry.list_events(actor, job_id, after_id=after, limit=BATCH, types=[LOG_EVENT])
        yield from (LogLine.from_event(event) for event in events)
        if len(events) < BATCH:
            return
        after = events[-1].id


def highlighted(message: str, query: str) -> list[tuple[str, bool]]:
    """`message` cut into (text, is a match of `query` in any case) pieces, for a page to mark the matches."""
    if not query:
        return [(message, False)]
    folded, wanted = message.casefold(), query.casefold()
    if len(folded) != len(message):  # a case fold that changes lengths: no safe positions to cut at
        return [(message, False)]
    pieces: list[tuple[str, bool]] = []
    start = 0
    while (found := folded.find(wanted, start)) >= 0:
        if found > start:
            pieces.append((message[start:found], False))
        pieces.append((message[found : found + len(wanted)], True))
        start = found + len(wanted)
    if start < len(message):
        pieces.append((message[start:], False))
    return pieces
