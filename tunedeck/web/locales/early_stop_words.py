"""The sentence that says a run stopped early, as a message a page translates (`_(early_stop_message(stop))`).

The same words as `EarlyStop.describe`, one whole message per shape of the sentence (with or
without the planned steps and the patience), so a translation never joins fragments.
"""

from __future__ import annotations

from tunedeck.store.early_stop import EarlyStop
from tunedeck.web.locales.catalogue import Message, marked


def early_stop_message(stop: EarlyStop) -> Message:
    """'stopped early at step 120 of 150 (no improvement in eval_loss for 3 evaluations)', to translate."""
    values = {"step": stop.step, "total": stop.total_steps, "metric": stop.metric, "patience": stop.patience}
    if stop.total_steps:
        if stop.patience is None:
            text = marked("stopped early at step {step} of {total} (no improvement in {metric})")
        elif stop.patience == 1:
            text = marked(
                "stopped early at step {step} of {total} (no improvement in {metric} for {patience} evaluation)"
            )
        else:
            text = marked(
                "stopped early at step {step} of {total} (no improvement in {metric} for {patience} evaluations)"
            )
    elif stop.patience is None:
        text = marked("stopped early at step {step} (no improvement in {metric})")
    elif stop.patience == 1:
        text = marked("stopped early at step {step} (no improvement in {metric} for {patience} evaluation)")
    else:
        text = marked("stopped early at step {step} (no improvement in {metric} for {patience} evaluations)")
    return Message(text, values)
