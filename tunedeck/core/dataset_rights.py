"""The rights a person records for a dataset: its licence and a free note, both optional.

One rule for every way in (the upload form, the dashboard, `PATCH /datasets/{id}`, the CLI):
the licence is one line of printable text (a licence id such as `cc-by-4.0`, or a short
name); the note may span lines but holds no other control characters. Empty text means
"not recorded". Every place that shows a dataset's licence words a missing one with
`describe_dataset_licence`.
"""

from __future__ import annotations

from typing import Final

LICENCE_MAX_LENGTH: Final = 200
RIGHTS_NOTE_MAX_LENGTH: Final = 2000
NOT_RECORDED: Final = "not recorded"
LICENCE_HELP: Final = (
    f"The dataset's licence or terms of use (one line, at most {LICENCE_MAX_LENGTH} characters), "
    "such as cc-by-4.0 or 'internal, no redistribution'."
)
RIGHTS_NOTE_HELP: Final = (
    f"A note on the dataset's rights: who owns it, where it came from, what it may be used for "
    f"(at most {RIGHTS_NOTE_MAX_LENGTH} characters)."
)


def check_licence(value: str | None) -> str | None:
    """The licence, trimmed, or None when empty; ValueError saying what is expected otherwise."""
    return _checked(value, LICENCE_MAX_LENGTH, multiline=False)


def check_rights_note(value: str | None) -> str | None:
    """The rights note, trimmed, or None when empty; ValueError saying what is expected otherwise."""
    return _checked(value, RIGHTS_NOTE_MAX_LENGTH, multiline=True)


def describe_dataset_licence(licence: str | None) -> str:
    """How a dataset's licence is shown: the recorded text, or that none was recorded."""
    return licence if licence else NOT_RECORDED


def _checked(value: str | None, limit: int, *, multiline: bool) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected text")
    # A browser sends a text area's line breaks as CRLF.
    text = value.replace("\r\n", "\n").strip()
    if not text:
        return None
    if len(text) > limit:
        raise ValueError(f"expected at most {limit} characters, found {len(text)}")
    allowed = "\n\t" if multiline else ""
    bad = next((ch for ch in text if not ch.isprintable() and ch not in allowed), None)
    if bad is not None:
        what = "printable text" if multiline else "one line of printable text"
        raise ValueError(f"expected {what}, found the control character U+{ord(bad):04X}")
    return text
