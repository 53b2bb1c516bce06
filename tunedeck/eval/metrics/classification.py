"""Classification metrics per class, not just one global average (the experiment method).

Conventions, chosen so reports are comparable across variants:

- Every declared label gets a row, in the given order, even when it never occurs
  in this evaluation set; a ratio whose denominator is zero (no prediction of a
  class, no example of a class) is reported as 0.0 rather than left undefined.
- Macro-F1 is the unweighted mean of the per-class F1 over *all* declared labels,
  so a class missing from the evaluation set pulls it down: declare only labels
  the set contains, or read the per-class table.
- A prediction outside the label set (a generated answer such as "maybe") is a
  miss for its true class and a false positive for no class. It is counted in the
  `outside_labels` column of the confusion matrix so each row still sums to the
  class support.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.eval.metrics.inputs import MetricInputError, check_aligned


@dataclass(frozen=True)
class ClassMetrics:
    """Precision, recall, F1 and support of one class."""

    precision: float
    recall: float
    f1: float
    support: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready form."""
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "support": self.support}


@dataclass(frozen=True)
class ClassificationReport:
    """Accuracy, macro-F1, the per-class table and the confusion matrix of one evaluation.

    `confusion_matrix[i][j]` counts examples of true class `labels[i]` predicted as
    `labels[j]`; `outside_labels[i]` counts examples of true class `labels[i]`
    whose prediction is not a declared label.
    """

    labels: tuple[str, ...]
    accuracy: float
    macro_f1: float
    per_class: dict[str, ClassMetrics]
    confusion_matrix: tuple[tuple[int, ...], ...]
    outside_labels: tuple[int, ...]
    num_examples: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; guard paths address it, e.g. `per_class.spam.f1`."""
        return {
            "num_examples": self.num_examples,
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "per_class": {label: metrics.to_dict() for label, metrics in self.per_class.items()},
            "confusion_matrix": {
                "labels": list(self.labels),
                "matrix": [list(row) for row in self.confusion_matrix],
                "outside_labels": list(self.outside_labels),
            },
        }


def classification_metrics(
    y_true: Sequence[str], y_pred: Sequence[str], labels: Sequence[str]
) -> ClassificationReport:
    """Score predicted labels against true labels over the declared `labels`, in that order.

    Every true label must be declared (an undeclared one means the label set or the
    data is wrong); predictions may fall outside it (see the module notes).
    """
    # scikit-learn is imported here so importing the metrics package stays cheap.
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    check_aligned(y_pred, y_true, "classification metrics")
    label_list = [str(label) for label in labels]
    if not label_list:
        raise MetricInputError("classification metrics: the label set is empty")
    duplicates = sorted({label for label in label_list if label_list.count(label) > 1})
    if duplicates:
        raise MetricInputError(f"classification metrics: labels declared twice: {duplicates}")
    truth = [str(label) for label in y_true]
    predicted = [str(label) for label in y_pred]
    declared = set(label_list)
    undeclared = sorted({label for label in truth if label not in declared})
    if undeclared:
        raise MetricInputError(
            f"classification metrics: true labels {undeclared} are not in the label set {label_list}"
        )

    precision, recall, f1, support = precision_recall_fscore_support(
        truth, predicted, labels=label_list, average=None, zero_division=0.0
    )
    per_class = {
        label: ClassMetrics(
            precision=float(precision[i]), recall=float(recall[i]), f1=float(f1[i]), support=int(support[i])
        )
        for i, label in enumerate(label_list)
    }
    # scikit-learn drops pairs whose prediction is undeclared; the remainder of each row is that count.
    matrix = confusion_matrix(truth, predicted, labels=label_list)
    rows = tuple(tuple(int(count) for count in row) for row in matrix)
    outside = tuple(per_class[label].support - sum(rows[i]) for i, label in enumerate(label_list))
    correct = sum(1 for t, p in zip(truth, predicted, strict=True) if t == p)
    return ClassificationReport(
        labels=tuple(label_list),
        accuracy=correct / len(truth),
        macro_f1=sum(metrics.f1 for metrics in per_class.values()) / len(label_list),
        per_class=per_class,
        confusion_matrix=rows,
        outside_labels=outside,
        num_examples=len(truth),
    )
