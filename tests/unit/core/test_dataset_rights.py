"""The rule for a dataset's recorded licence and rights note, shared by the API, the dashboard and the CLI."""

from __future__ import annotations

import pytest

from tunedeck.core.dataset_rights import (
    LICENCE_MAX_LENGTH,
    RIGHTS_NOTE_MAX_LENGTH,
    check_licence,
    check_rights_note,
    describe_dataset_licence,
)


def test_text_is_trimmed_and_empty_text_means_not_recorded() -> None:
    assert check_licence("  cc-by-4.0 ") == "cc-by-4.0"
    assert check_licence("   ") is None and check_licence(None) is None
    assert check_rights_note("Bought from X.\r\nInternal use only.\n") == "Bought from X.\nInternal use only."
    assert check_rights_note("a\rb\tc") == "a\nb\tc"
    assert check_licence("\u00a0Lizenz für Forschung\u00a0") == "Lizenz für Forschung"  # any text but controls
    assert describe_dataset_licence(None) == "not recorded"
    assert describe_dataset_licence("cc-by-4.0") == "cc-by-4.0"


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (check_licence, "x" * (LICENCE_MAX_LENGTH + 1), f"at most {LICENCE_MAX_LENGTH} characters"),
        (check_licence, "cc-by\n4.0", "one line of text without control characters, found the character U+000A"),
        (check_licence, "mit\x00", "U+0000"),
        (check_licence, "mit\u2028", "U+2028"),
        (check_rights_note, "y" * (RIGHTS_NOTE_MAX_LENGTH + 1), f"at most {RIGHTS_NOTE_MAX_LENGTH} characters"),
        (check_rights_note, "ok\x1b[31m", "text without control characters, found the character U+001B"),
        (check_rights_note, "ok\x85", "U+0085"),
    ],
)
def test_bad_text_is_refused_saying_what_is_expected(check: object, value: str, message: str) -> None:
    with pytest.raises(ValueError, match="expected") as refused:
        check(value)  # type: ignore[operator]
    assert message in str(refused.value)
