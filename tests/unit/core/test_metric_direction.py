"""One rule says which way a metric improves, and every place that ranks metrics uses it."""

from __future__ import annotations

import pytest

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError
from tunedeck.core.metric_direction import greater_is_better, lower_is_better
from tunedeck.eval.guards import Guard


@pytest.mark.parametrize(
    ("metric", "lower"),
    [
        ("loss", True),
        ("eval_loss", True),
        ("eval_mean_loss", True),
        ("eval_gen_perplexity", True),
        ("test.loss", True),
        ("perplexity", True),
        ("eval_accuracy", False),
        ("eval_exact_match", False),
        ("eval_rougeL", False),
        ("lossless_rate", False),
        ("gloss", False),
        # Preference tuning: the rejected answer's likelihood improves downwards, the rest upwards.
        ("rejected_logp", True),
        ("eval_rejected_logp", True),
        ("logps/rejected", True),
        ("eval_rewards/rejected", True),
        ("chosen_logp", False),
        ("eval_chosen_logp", False),
        ("reward_accuracy", False),
        ("eval_reward_margin", False),
        ("rewards/chosen", False),
        ("rewards/margins", False),
    ],
)
def test_losses_and_perplexities_improve_downwards_everything_else_upwards(metric: str, lower: bool) -> None:
    assert lower_is_better(metric) is lower
    assert greater_is_better(metric) is not lower


@pytest.mark.parametrize(
    "metric", ["eval_mean_loss", "eval_gen_perplexity", "eval_accuracy", "eval_rejected_logp", "eval_reward_margin"]
)
def test_the_config_and_the_guards_rank_a_metric_the_same_way(metric: str) -> None:
    # These names once went one way for the best checkpoint's ranking and the other way in the config.
    config = TrainingConfig.model_construct(metric_for_best_model=metric)  # generation metrics need more keys
    assert config.greater_is_better is greater_is_better(metric)
    refused = lower_is_better(metric)
    if refused:
        with pytest.raises(ConfigError, match="lower-is-better"):
            Guard.parse(f"{metric} >= baseline")
    else:
        assert Guard.parse(f"{metric} >= baseline").metric == metric
