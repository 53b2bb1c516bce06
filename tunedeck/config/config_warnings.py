"""Warnings about a valid config: choices that run, but probably not as the user meant.

A warning never refuses a config (that is what contradictions in `TrainingConfig` are
for); it is shown by `tunedeck config validate` and can be returned by the API beside
the resolved config.
"""

from __future__ import annotations

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import Issue


def config_warnings(config: TrainingConfig, source: str | None = None) -> list[Issue]:
    """Every warning for `config`, each naming its field and the alternative."""
    warnings: list[Issue] = []
    if config.lr_scheduler == "constant" and config.warmup_ratio > 0 and config.user_set("warmup_ratio"):
        # The job config keys say every scheduler supports warmup, but also that "constant" is a fixed
        # rate for the whole run; tunedeck keeps "constant" constant and says so here.
        warnings.append(
            Issue(
                f'warmup_ratio {config.warmup_ratio} is ignored with lr_scheduler "constant" '
                "(a fixed learning rate from the first step)",
                field="warmup_ratio",
                file=source,
                expected='lr_scheduler "constant_with_warmup" for a warmup then a constant rate, or warmup_ratio 0',
            )
        )
    return warnings
