"""The rights a person records for a dataset: its licence and a free note, both optional.

One rule for every way in (the upload form, the dashboard, `PATCH /datasets/{id}`, the CLI):
the licence is one line of text without control characters (a licence id such as `cc-by-4.0`,
or a short name); the note may also hold tabs and line breaks. Empty text means
"not recorded". Every place that shows a dataset's licence words a missing one with
`describe_dataset_licence`.
"""

from __future__ import annotations

import re
from typing import Final

LICENCE_MAX_LENGTH: Final = 200
# 1000 characters are at most 4000 bytes of UTF-8: within what an upload form field may carry.
RIGHTS_NOTE_MAX_LENGTH: Final = 1000
# What each may hold, as the API documents it: no control characters (C0, DEL, C1) and no line or
# paragraph separators; the note may also hold tabs and line breaks (CR, LF or CRLF, kept as LF).
LICENCE_PATTERN: Final = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"
RIGHTS_NOTE_PATTERN: Final = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"
NOT_RECORDED: Final = "not recorded"
LICENCE_HELP: Final = (
    f"The dataset's licence or terms of use (one line, at most {LICENCE_MAX_LENGTH} characters), "
    "such as cc-by-4.0 or 'internal, no redistribution'."
)
RIGHTS_NOTE_HELP: Final = (
    f"A note on the dataset's rights: who owns it, where it came from, what it may be used for "
    f"(at most {RIGHTS_NOTE_MAX_LENGTH} characters)."
)
_LICENCE_BAD = re.compile(LICENCE_PATTERN.replace("^[^", "[").replace("]*$", "]"))
_RIGHTS_NOTE_BAD = re.compile(RIGHTS_NOTE_PATTERN.replace("^[^", "[").replace("]*$", "]"))


def check_licence(value: str | None) -> str | None:
    """The licence, trimmed, or None when empty; ValueError saying what is expected otherwise."""
    return _checked(value, LICENCE_MAX_LENGTH, _LICENCE_BAD, "one line of text without control characters")


def check_rights_note(value: str | None) -> str | None:
    """The rights note, trimmed, line breaks as LF, or None when empty; ValueError saying what is expected otherwise."""
    checked = _checked(value, RIGHTS_NOTE_MAX_LENGTH, _RIGHTS_NOTE_BAD, "text without control characters")
    # A browser sends a text area's line breaks as CRLF.
    return checked.replace("\r\n", "\n").replace("\r", "\n") if checked is not None else None


def describe_dataset_licence(licence: str | None) -> str:
    """How a dataset's licence is shown: the recorded text, or that none was recorded."""
    return licence if licence else NOT_RECORDED


def _checked(value: str | None, limit: int, bad: re.Pattern[str], what: str) -> str | None:
    """`value` trimmed (None when empty), refused when longer than `limit` as sent or holding a `bad` character."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected text")
    if len(value) > limit:
        raise ValueError(f"expected at most {limit} characters, found {len(value)}")
    found = bad.search(value)
    if found is not None:
        raise ValueError(f"expected {what}, found the character U+{ord(found.group()):04X}")
    return value.strip() or None
