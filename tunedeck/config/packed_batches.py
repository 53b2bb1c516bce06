"""How whole-dataset packing (`packing: true`) splits each optimizer step: one packed row per micro-batch.

A packed row already holds up to `max_length` tokens, enough work for one forward pass; the
rows of a step side by side only multiply the activations kept for the backward. So a run
with `packing: true` trains micro-batches of one packed row and accumulates `batch_size` ×
`gradient_accumulation_steps` of them per optimizer step. The step takes the same rows in
the same order (the sampler's order does not depend on the micro-batch), the loss is still
the step's summed token loss over its labelled-token count (the trainer counts the tokens of
all accumulated micro-batches), and the number of steps is unchanged: only the peak memory
is that of one row instead of `batch_size` rows. Measured on CPU, it is also faster (smaller
working sets). The run's log says so, and `results.json` records the split under `batching`.
"""

from __future__ import annotations

from tunedeck.config.training import TrainingConfig

PACKED_ROWS_PER_MICRO_BATCH = 1


def packed_row_steps(config: TrainingConfig) -> TrainingConfig:
    """`config` as a run trains it: with `packing: true`, one packed row per micro-batch and the
    accumulation that keeps the effective batch; any other config unchanged."""
    if config.packing is not True or config.batch_size <= PACKED_ROWS_PER_MICRO_BATCH:
        return config
    rows_per_step = config.batch_size * config.gradient_accumulation_steps
    return config.model_copy(update={
        "batch_size": PACKED_ROWS_PER_MICRO_BATCH,
        "gradient_accumulation_steps": rows_per_step // PACKED_ROWS_PER_MICRO_BATCH,
    })


def describe_packed_steps(requested: TrainingConfig, trained: TrainingConfig) -> str | None:
    """The log line saying how the run splits packed steps; None when it trains `requested` as given."""
    if requested.batch_size == trained.batch_size:
        return None
    return (
        f"whole-dataset packing: one packed row per forward pass, {trained.gradient_accumulation_steps} "
        f"accumulated per optimizer step (batch_size {requested.batch_size} × gradient_accumulation_steps "
        f"{requested.gradient_accumulation_steps}: the same rows and loss per step, the memory of one row)"
    )
