"""A scheduled deletion as the pages say it, in the page's language.

The English is `ScheduledDeletion.describe()`'s, word for word: a whole sentence per thing deleted
and per state (deleted, kept, due after a number of days, due on a date), so that a language can
agree its words with the subject. Raw data is counted from its last use, checkpoints and jobs
from the job's end, as the schedule counts them.
"""

from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup

from tunedeck.service.privacy.retention_plan import ScheduledDeletion
from tunedeck.web.locales.catalogue import marked

SENTENCES = {
    "raw_data": {
        "deleted": marked("Raw data was deleted on {date} by its retention policy."),
        "kept": marked("Raw data: kept until you delete it."),
        "due": marked("Raw data will be deleted {days} days after its last use ({whose})."),
        "dated": marked("Raw data will be deleted on {date}, {days} days after its last use ({whose})."),
    },
    "checkpoints": {
        "deleted": marked(
            "Checkpoints other than the best and the newest was deleted on {date} by its retention policy."
        ),
        "kept": marked("Checkpoints other than the best and the newest: kept until you delete it."),
        "due": marked(
            "Checkpoints other than the best and the newest will be deleted {days} days after it finished ({whose})."
        ),
        "dated": marked(
            "Checkpoints other than the best and the newest will be deleted on {date}, {days} days after it finished ({whose})."  # noqa: E501
        ),
    },
    "job": {
        "deleted": marked("This job was deleted on {date} by its retention policy."),
        "kept": marked("This job: kept until you delete it."),
        "due": marked("This job will be deleted {days} days after it finished ({whose})."),
        "dated": marked("This job will be deleted on {date}, {days} days after it finished ({whose})."),
    },
}
WHOSE = {
    "dataset": marked("this dataset's policy"),
    "user": marked("your policy"),
    "operator": marked("the server's limit"),
}


def retention_line(entry: ScheduledDeletion, translate: Callable[..., Markup]) -> Markup:
    """One sentence for a page: when `entry` is (or was) deleted and by which rule, in `translate`'s language."""
    sentences = SENTENCES[entry.what]
    date = entry.at.date().isoformat() if entry.at is not None else ""
    if entry.done and entry.at is not None:
        return translate(sentences["deleted"], date=date)
    if entry.policy is None:
        return translate(sentences["kept"])
    whose = translate(WHOSE[entry.policy.level])
    if entry.at is None:
        return translate(sentences["due"], days=entry.policy.days, whose=whose)
    return translate(sentences["dated"], date=date, days=entry.policy.days, whose=whose)
