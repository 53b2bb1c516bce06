"""A scheduled deletion as the pages say it: the schedule's own English, and the page's language."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tunedeck.service.privacy.retention_plan import DecidingPolicy, ScheduledDeletion
from tunedeck.web.locales.catalogue import catalogue
from tunedeck.web.retention_view import retention_line

WHEN = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
AFTER = {"raw_data": "its last use", "checkpoints": "it finished", "job": "it finished"}


def _entries() -> list[ScheduledDeletion]:
    entries = []
    for what, after in AFTER.items():
        entries.append(ScheduledDeletion(what, WHEN, after, DecidingPolicy("user", 30), done=True))  # type: ignore[arg-type]
        entries.append(ScheduledDeletion(what, None, after, None))  # type: ignore[arg-type]
        for level in ("dataset", "user", "operator"):
            policy = DecidingPolicy(level, 7)  # type: ignore[arg-type]
            entries.append(ScheduledDeletion(what, None, after, policy))  # type: ignore[arg-type]
            entries.append(ScheduledDeletion(what, WHEN, after, policy))  # type: ignore[arg-type]
    return entries


@pytest.mark.parametrize("entry", _entries(), ids=lambda entry: f"{entry.what}-{entry.done}-{entry.at}-{entry.policy}")
def test_in_english_each_line_is_the_schedule_s_own_sentence(entry: ScheduledDeletion) -> None:
    assert retention_line(entry, catalogue("en").translator()).unescape() == entry.describe()


def test_in_french_a_line_names_the_date_the_days_and_whose_rule() -> None:
    entry = ScheduledDeletion("raw_data", WHEN, "its last use", DecidingPolicy("dataset", 7))
    line = retention_line(entry, catalogue("fr").translator()).unescape()
    assert line == (
        "Les données brutes seront supprimées le 2031-03-04, 7 jours après leur dernière utilisation "
        "(la politique de ce jeu de données)."
    )
