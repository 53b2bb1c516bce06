"""Which way a metric improves: one rule for ranking checkpoints, early stopping, guards, charts and reports.

Losses and perplexities improve downwards; every other metric (accuracy, exact match, F1,
ROUGE, rewards) improves upwards. A metric is a loss or a perplexity when its last word
(after the last `_` or `.`) says so: `loss`, `eval_loss`, `eval_mean_loss`,
`eval_gen_perplexity`, `test.loss`.
"""

from __future__ import annotations

import re

# Kept in the subset of regular expressions that JSON Schema and Python read alike.
LOWER_IS_BETTER_PATTERN = r"(?:^|[._])(?:loss|perplexity)$"
_LOWER_IS_BETTER = re.compile(LOWER_IS_BETTER_PATTERN)


def lower_is_better(metric: str) -> bool:
    """Whether `metric` improves when it goes down (a loss or a perplexity)."""
    return _LOWER_IS_BETTER.search(metric) is not None


def greater_is_better(metric: str) -> bool:
    """Whether `metric` improves when it goes up (everything that is not a loss or a perplexity)."""
    return not lower_is_better(metric)
