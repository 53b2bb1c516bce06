"""The words of a job's states, which pages show translated where they show a state (`_(job.state)`)."""

from __future__ import annotations

from tunedeck.core.states import JobState
from tunedeck.web.locales.catalogue import marked

JOB_STATE_WORDS: dict[str, str] = {
    JobState.QUEUED: marked("queued"),
    JobState.RUNNING: marked("running"),
    JobState.PAUSING: marked("pausing"),
    JobState.PAUSED: marked("paused"),
    JobState.SUCCEEDED: marked("succeeded"),
    JobState.FAILED: marked("failed"),
    JobState.CANCELLED: marked("cancelled"),
}
