"""The token inspector's warning: how many rows training would refuse with the settings shown, and why."""

from __future__ import annotations

from typing import Any

from tunedeck.web.dataset_view import refusal_warning
from tunedeck.web.locales.catalogue import catalogue

ENGLISH = catalogue("en").translator()
FRENCH = catalogue("fr").translator()


def _report(**truncation: Any) -> dict[str, Any]:
    counts = {"total": 10, "no_answer": 0, "lost_all_answer": 0, "refused_rows": [], "truncation": "refuse"}
    return {"max_length": 64, "chat_mask_method": None, "truncation": {**counts, **truncation}}


def test_no_warning_when_every_row_keeps_a_trained_token() -> None:
    assert refusal_warning(_report(), ENGLISH) is None
    assert refusal_warning({"max_length": 64}, ENGLISH) is None  # an older report without the truncation summary


def test_rows_cut_off_and_rows_without_an_answer_are_counted_and_named() -> None:
    warning = refusal_warning(_report(no_answer=1, lost_all_answer=2, refused_rows=[0, 4, 7]), ENGLISH)
    assert warning is not None
    assert "With max_length 64, truncation refuse, training would refuse 3 of 10 rows" in warning
    assert "2 lose their whole answer to truncation at max_length 64" in warning
    assert "1 have no trained token even before truncation" in warning
    assert "Rows 1, 5, 8." in warning
    assert "Raise max_length" in warning


def test_drop_leaves_rows_out_and_the_chat_template_is_named() -> None:
    report = _report(no_answer=1, refused_rows=[2], truncation="drop")
    report["chat_mask_method"] = "assistant_masks"
    warning = refusal_warning(report, ENGLISH)
    assert warning is not None
    assert "truncation drop, chat template masks from assistant_masks, training would leave out 1 of 10 rows" in warning
    assert "Raise max_length" not in warning  # no answer to fit: raising it would not help


def test_more_refused_rows_than_are_named_says_so() -> None:
    warning = refusal_warning(_report(lost_all_answer=30, refused_rows=list(range(30))), ENGLISH)
    assert warning is not None
    assert "Rows 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and more." in warning


def test_the_warning_speaks_the_page_language_and_keeps_the_config_words() -> None:
    warning = refusal_warning(_report(no_answer=1, lost_all_answer=2, refused_rows=[0, 4, 7]), FRENCH)
    assert warning is not None
    assert "l'entraînement refuserait 3 lignes sur 10" in warning.unescape()
    assert "2 perdent toute leur réponse à la troncature à max_length 64" in warning.unescape()
    assert "Lignes 1, 5, 8." in warning and "truncate_prompt" in warning
