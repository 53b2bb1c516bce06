"""A run's early stop as the job page says it, in the page's words (`EarlyStop.describe` is the English one)."""

from __future__ import annotations

from tunedeck.jobs.early_stop import EarlyStop
from tunedeck.web.locales.catalogue import Message, marked


def early_stop_message(stop: EarlyStop) -> Message:
    """'stopped early at step 120 of 150 (no improvement in eval_loss for 3 evaluations)', to translate."""
    values = {"step": stop.step, "total": stop.total_steps, "metric": stop.metric, "patience": stop.patience}
    if stop.total_steps:
        if stop.patience is None:
            text = marked("stopped early at step {step} of {total} (no improvement in {metric})")
        elif stop.patience == 1:
            text = marked("stopped early at step {step} of {total} (no improvement in {metric} for 1 evaluation)")
        else:
            text = marked(
                "stopped early at step {step} of {total} (no improvement in {metric} for {patience} evaluations)"
            )
    elif stop.patience is None:
        text = marked("stopped early at step {step} (no improvement in {metric})")
    elif stop.patience == 1:
        text = marked("stopped early at step {step} (no improvement in {metric} for 1 evaluation)")
    else:
        text = marked("stopped early at step {step} (no improvement in {metric} for {patience} evaluations)")
    return Message(text, values)
