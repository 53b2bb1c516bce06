"""Exact match and token F1 of generated text on hand-computed cases."""

from __future__ import annotations

import pytest

from tunedeck.eval.metrics import MetricInputError, generation_metrics, normalize_whitespace, token_f1


def test_means_equal_the_hand_computation() -> None:
    predictions = ["Paris", "The Eiffel Tower!", "a big red dog", ""]
    references = ["  Paris ", "eiffel tower", "the red cat", "something"]
    # 0: same after whitespace normalisation -> EM 1, F1 1
    # 1: case and "!" differ -> EM 0; tokens [eiffel, tower] both sides -> F1 1
    # 2: tokens [big, red, dog] vs [red, cat]: 1 common, P = 1/3, R = 1/2, F1 = (2/6) / (5/6) = 2/5
    # 3: empty prediction -> EM 0, F1 0
    report = generation_metrics(predictions, references)

    assert [example.exact_match for example in report.examples] == [True, False, False, False]
    assert [example.token_f1 for example in report.examples] == pytest.approx([1.0, 1.0, 0.4, 0.0])
    assert report.exact_match == pytest.approx(1 / 4)
    assert report.token_f1 == pytest.approx((1 + 1 + 0.4 + 0) / 4)
    assert report.to_dict(include_examples=False) == {
        "num_examples": 4,
        "exact_match": 0.25,
        "token_f1": pytest.approx(0.6),
    }


def test_exact_match_normalises_whitespace_only() -> None:
    assert normalize_whitespace("  New \t York\n") == "New York"
    report = generation_metrics(["New  York\n", "new york"], ["New York", "New York"])
    assert [example.exact_match for example in report.examples] == [True, False]


def test_token_f1_counts_repeated_tokens_once_per_occurrence() -> None:
    # [cat, cat] vs [cat]: 1 common, P = 1/2, R = 1 -> F1 = 2/3
    assert token_f1("the cat cat", "cat") == pytest.approx(2 / 3)


def test_texts_empty_after_normalisation_match_each_other() -> None:
    assert token_f1("The.", "a") == 1.0
    assert token_f1("the", "cat") == 0.0


def test_articles_can_be_chosen_for_another_language() -> None:
    french = frozenset({"le", "la", "les", "un", "une", "des"})
    assert token_f1("le chat", "chat") == pytest.approx(2 / 3)
    assert token_f1("le chat", "chat", articles=french) == 1.0


def test_the_best_of_several_references_counts() -> None:
    report = generation_metrics(["blue", "dark red"], [["Blue", "blue"], ["red", "crimson"]])

    assert [example.exact_match for example in report.examples] == [True, False]
    # "dark red" vs "red": P = 1/2, R = 1 -> 2/3; vs "crimson": 0.
    assert report.examples[1].token_f1 == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("predictions", "references", "message"),
    [
        (["a"], [], "1 predictions but 0 references"),
        ([], [], "no examples"),
        (["a"], [[]], "non-empty list of strings"),
    ],
)
def test_unusable_inputs_are_refused(predictions: list[str], references: list[object], message: str) -> None:
    with pytest.raises(MetricInputError, match=message):
        generation_metrics(predictions, references)  # type: ignore[arg-type]
