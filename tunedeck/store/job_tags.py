"""Job tags: what a valid tag is, and the tags of one job set as a whole.

Tags are a job's metadata, not its training config: its owner sets them at creation and
changes them later; they sort and filter job lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy.orm import Session

from tunedeck.core.errors import Issue, IssueListError
from tunedeck.store.models import Job, JobTag

MAX_TAGS = 16
MAX_TAG_LENGTH = 32
TAG_PATTERN = r"^[A-Za-z0-9._-]{1,32}$"
TAG_RULE = "1 to 32 letters, digits, '-', '_' or '.'"
_TAG = re.compile(TAG_PATTERN)


class TagError(IssueListError):
    """A tag list that breaks the tag rules; each issue names the tag's place (`tags[2]`)."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(issues=issues, title="invalid tags")


def validated_tags(tags: Iterable[object], field: str = "tags") -> list[str]:
    """`tags` checked and without repeats, in their first order; TagError naming every bad one.

    A repeat is dropped rather than refused: asking twice for a tag means the same as once.
    """
    issues: list[Issue] = []
    kept: list[str] = []
    for index, tag in enumerate(tags):
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            found = tag if isinstance(tag, str) else type(tag).__name__
            issues.append(Issue("not a valid tag", field=f"{field}[{index}]", expected=TAG_RULE, found=str(found)[:64]))
        elif tag not in kept:
            kept.append(tag)
    if len(kept) > MAX_TAGS:
        issues.append(Issue(f"{len(kept)} tags", field=field, expected=f"at most {MAX_TAGS} tags"))
    if issues:
        raise TagError(issues)
    return kept


def tags_from_text(text: str) -> list[str]:
    """Tags typed in one line, separated by commas or spaces (the dashboard's tag field), validated."""
    return validated_tags([part for part in re.split(r"[,\s]+", text) if part])


def replace_tags(session: Session, job: Job, tags: list[str]) -> None:
    """Give `job` exactly `tags` (already validated), keeping the rows of tags it keeps."""
    wanted = set(tags)
    job.tag_rows = [row for row in job.tag_rows if row.tag in wanted]
    held = {row.tag for row in job.tag_rows}
    for tag in sorted(wanted - held):
        job.tag_rows.append(JobTag(job_id=job.id, tag=tag))
    job.tag_rows.sort(key=lambda row: row.tag)
    session.flush()
