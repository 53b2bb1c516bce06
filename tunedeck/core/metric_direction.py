"""Which way a metric improves: one rule for ranking checkpoints, early stopping, guards, charts and reports.

Losses and perplexities improve downwards; every other metric (accuracy, exact match, F1,
ROUGE, rewards) improves upwards. A metric is a loss or a perplexity when its last word
(after the last `_` or `.`) says so: `loss`, `eval_loss`, `eval_mean_loss`,
`eval_gen_perplexity`, `test.loss`.

Preference tuning adds the likelihood of the rejected answer, which improves downwards too
(the model learns to prefer the chosen one): `rejected_logp` and `eval_rejected_logp` as the
evaluation reports it, `logps/rejected` and `rewards/rejected` (with or without `eval_`) as
training logs it. The chosen answer's log-probability, the reward margin and the reward
accuracy improve upwards like every other metric.
"""

from __future__ import annotations

import re

# Kept in the subset of regular expressions that JSON Schema and Python read alike.
LOWER_IS_BETTER_WORDS = r"(?:loss|perplexity|rejected_logp|logps/rejected|rewards/rejected)"
"""The last words of the metrics that improve downwards (a regular expression group)."""
LOWER_IS_BETTER_PATTERN = rf"(?:^|[._]){LOWER_IS_BETTER_WORDS}$"
_LOWER_IS_BETTER = re.compile(LOWER_IS_BETTER_PATTERN)


def lower_is_better(metric: str) -> bool:
    """Whether `metric` improves when it goes down (a loss, a perplexity, the rejected answer's likelihood)."""
    return _LOWER_IS_BETTER.search(metric) is not None


def greater_is_better(metric: str) -> bool:
    """Whether `metric` improves when it goes up (every metric `lower_is_better` does not name)."""
    return not lower_is_better(metric)
