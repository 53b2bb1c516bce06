"""The baseline/final evaluation procedure at every evaluation during training (`eval_generation_each_eval`).

The trainer's own evaluation measures the loss (and, for classification, accuracy and
macro-F1) on the validation batches. The procedure fixed for the baseline measures what
the job is about: greedy generation scored by exact match and token F1, JSON validity and
fields for extraction, per-class scores for classification. With this callback the same
procedure (same rows, chat template, decoding, hash) runs on the current weights at every
evaluation, and its task metrics join that evaluation's metrics under `eval_gen_`, so the
`eval` event carries them and `metric_for_best_model` / early stopping can rank on them.

The callback must come before the events callback and early stopping in the trainer's
list: each callback receives the same metrics mapping, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback

from tunedeck.config.training import GENERATION_METRIC_PREFIX

METRIC_PREFIX = f"eval_{GENERATION_METRIC_PREFIX}"
# The trainer's eval_loss is measured on the same tokens; counts do not change during a run.
_LEFT_OUT = frozenset({"eval_loss", "eval_perplexity", "loss", "perplexity", "num_examples", "support"})
# The job store's metric series names hold 100 characters; a longer name (a very long label) is left out.
MAX_METRIC_NAME = 100


class GenerationEvalCallback(TrainerCallback):
    """Runs `evaluator` (the run's `BaselineEvaluator`) on the current model at each evaluation.

    `last_result` is the latest full evaluation, so the final evaluation can reuse the one made
    during the trainer's last `evaluate()` instead of generating twice on the same weights.
    """

    def __init__(self, evaluator: Any, tokenizer: Any) -> None:
        self.evaluator = evaluator
        self.tokenizer = tokenizer
        self.last_result: Any = None
        self._training = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluations from now on interrupt training: the model goes back to train mode after each."""
        self._training = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluations after training (the final one) leave the model in eval mode."""
        self._training = False

    def on_evaluate(
        self,
        args: Any,
        state: Any,
        control: Any,
        metrics: dict[str, Any] | None = None,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        """Evaluate `model` with the fixed procedure and add its task metrics to `metrics`."""
        if metrics is None or model is None:
            return
        try:
            result = self.evaluator.evaluate(model, self.tokenizer)
        finally:
            if self._training:
                model.train()
        self.last_result = result
        metrics.update(procedure_metrics(result.metrics))

    def take_result(self) -> Any:
        """The latest evaluation, forgotten here so it is never reused for other weights."""
        result, self.last_result = self.last_result, None
        return result


def procedure_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric task metrics of an evaluation, flattened and prefixed: `eval_gen_per_class.spam.f1`.

    Nested tables become dotted names (the paths guards use); lists (the confusion matrix),
    flags, counts and the loss (reported by the trainer already) are left out.
    """
    flat: dict[str, float] = {}
    _flatten(metrics, "", flat)
    return {
        f"{METRIC_PREFIX}{name}": value for name, value in flat.items() if len(METRIC_PREFIX + name) <= MAX_METRIC_NAME
    }


def _flatten(node: Mapping[str, Any], path: str, into: dict[str, float]) -> None:
    for key, value in node.items():
        if key in _LEFT_OUT:
            continue
        name = f"{path}{key}"
        if isinstance(value, Mapping):
            _flatten(value, f"{name}.", into)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            into[name] = float(value)
