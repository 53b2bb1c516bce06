"""Per-class precision/recall/F1 and the confusion matrix against a hand-computed case."""

from __future__ import annotations

import json

import pytest

from tunedeck.eval.metrics import MetricInputError, classification_metrics

LABELS = ["spam", "ham", "promo"]
Y_TRUE = ["spam", "spam", "spam", "ham", "ham", "ham", "promo", "promo"]
Y_PRED = ["spam", "spam", "ham", "ham", "ham", "spam", "promo", "ham"]

# Hand computation (rows = true class, columns = predicted, order spam, ham, promo):
#   spam  -> spam, spam, ham          : [2, 1, 0]
#   ham   -> ham, ham, spam           : [1, 2, 0]
#   promo -> promo, ham               : [0, 1, 1]
# Column sums (times predicted): spam 3, ham 4, promo 1. Supports: 3, 3, 2.
#   spam : P = 2/3, R = 2/3, F1 = 2/3
#   ham  : P = 2/4, R = 2/3, F1 = 2·(1/2)(2/3) / (1/2 + 2/3) = (2/3) / (7/6) = 4/7
#   promo: P = 1/1, R = 1/2, F1 = 2·1·(1/2) / (3/2) = 2/3
# accuracy = (2 + 2 + 1) / 8 = 5/8; macro-F1 = (2/3 + 4/7 + 2/3) / 3 = 40/63
HAND_MATRIX = [[2, 1, 0], [1, 2, 0], [0, 1, 1]]
HAND_PER_CLASS = {
    "spam": (2 / 3, 2 / 3, 2 / 3, 3),
    "ham": (1 / 2, 2 / 3, 4 / 7, 3),
    "promo": (1.0, 1 / 2, 2 / 3, 2),
}


def test_per_class_values_and_confusion_matrix_equal_the_hand_computation() -> None:
    report = classification_metrics(Y_TRUE, Y_PRED, LABELS)

    assert report.accuracy == pytest.approx(5 / 8)
    assert report.macro_f1 == pytest.approx(40 / 63)
    for label, (precision, recall, f1, support) in HAND_PER_CLASS.items():
        metrics = report.per_class[label]
        assert metrics.precision == pytest.approx(precision), label
        assert metrics.recall == pytest.approx(recall), label
        assert metrics.f1 == pytest.approx(f1), label
        assert metrics.support == support, label
    assert [list(row) for row in report.confusion_matrix] == HAND_MATRIX
    assert report.outside_labels == (0, 0, 0)
    assert report.num_examples == 8


def test_to_dict_is_json_ready_and_keeps_the_label_order() -> None:
    data = json.loads(json.dumps(classification_metrics(Y_TRUE, Y_PRED, LABELS).to_dict()))

    assert list(data["per_class"]) == LABELS
    assert data["per_class"]["ham"]["f1"] == pytest.approx(4 / 7)
    assert data["confusion_matrix"] == {"labels": LABELS, "matrix": HAND_MATRIX, "outside_labels": [0, 0, 0]}


def test_the_given_label_order_orders_rows_and_columns() -> None:
    report = classification_metrics(Y_TRUE, Y_PRED, ["promo", "ham", "spam"])

    # The hand matrix with both axes reversed.
    assert [list(row) for row in report.confusion_matrix] == [[1, 1, 0], [0, 2, 1], [0, 1, 2]]


def test_zero_division_is_zero_and_an_absent_label_still_counts_in_macro_f1() -> None:
    # "other" is declared but never true nor predicted: every ratio of it divides by zero.
    report = classification_metrics(Y_TRUE, Y_PRED, [*LABELS, "other"])

    assert report.per_class["other"].to_dict() == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert report.macro_f1 == pytest.approx((2 / 3 + 4 / 7 + 2 / 3 + 0.0) / 4)


def test_a_prediction_outside_the_labels_is_a_miss_kept_in_its_row() -> None:
    # True: a, a, b, b. Predicted: a, "maybe", b, a.
    # a: P = 1/2 (predicted a twice, once right), R = 1/2; b: P = 1, R = 1/2.
    report = classification_metrics(["a", "a", "b", "b"], ["a", "maybe", "b", "a"], ["a", "b"])

    assert report.accuracy == pytest.approx(2 / 4)
    assert (report.per_class["a"].precision, report.per_class["a"].recall) == pytest.approx((1 / 2, 1 / 2))
    assert (report.per_class["b"].precision, report.per_class["b"].recall) == pytest.approx((1.0, 1 / 2))
    assert [list(row) for row in report.confusion_matrix] == [[1, 0], [1, 1]]
    assert report.outside_labels == (1, 0)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "labels", "message"),
    [
        (["a", "c"], ["a", "a"], ["a", "b"], "not in the label set"),
        (["a"], ["a", "b"], ["a", "b"], "1 references"),
        ([], [], ["a"], "no examples"),
        (["a"], ["a"], [], "label set is empty"),
        (["a"], ["a"], ["a", "b", "a"], "declared twice"),
    ],
)
def test_unusable_inputs_are_refused_with_the_reason(
    y_true: list[str], y_pred: list[str], labels: list[str], message: str
) -> None:
    with pytest.raises(MetricInputError, match=message):
        classification_metrics(y_true, y_pred, labels)
