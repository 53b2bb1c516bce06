"""The measured cost of the run's baseline and final evaluations, for the margins (check 8).

A run with a validation file evaluates the untrained model before training and the trained
one after it with one fixed procedure (the experiment method), writing every example's output to
`baseline_eval.json` and `final_eval.json`. For chat and prompt/completion data that
procedure decodes answers token by token, which costs far more than the forward pass the
training step time suggests; so it is measured: the run's own procedure on a few
validation rows, timed, and written in the run's format to weigh the file. For preference
rows the procedure scores both answers of each pair and generates the chosen one, so the
measured cost per row (a pair, as the file counts rows) holds all three.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from tunedeck.engine.preflight.context import PreflightContext


@dataclass(frozen=True)
class EvalCost:
    """Seconds and disk bytes per validation row of one baseline (or final) evaluation pass."""

    rows_measured: int
    seconds_per_row: float
    bytes_per_row: float
    fixed_bytes: int  # the procedure and metrics every evaluation file holds whatever its size
    task: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **asdict(self),
            "seconds_per_row": round(self.seconds_per_row, 6),
            "bytes_per_row": round(self.bytes_per_row, 1),
        }


def measure_eval_cost(ctx: PreflightContext) -> EvalCost | None:
    """Run the run's evaluation procedure on a few validation rows; None without a validation file.

    Needs the loaded model (call it before check 6 releases it). The model has trained a few
    preflight steps by then; its answers may end sooner than the untrained baseline's, so
    the figure is a measurement of this procedure on this hardware, not a bound.
    """
    if ctx.spec.validation_path is None:
        return None
    ctx.require("loaded", "data")
    from tunedeck.core.atomic_files import write_json_atomic
    from tunedeck.data.loading import load_dataset
    from tunedeck.eval.baseline import BaselineEvaluator

    validation = load_dataset(ctx.spec.validation_path)
    sample = list(validation.rows[: max(1, ctx.options.eval_sample_rows)])
    evaluator = BaselineEvaluator.for_run(
        ctx.config, sample, validation.kind, label2id=ctx.data.label2id, batch_size=ctx.micro_batch
    )
    started = time.perf_counter()
    document = evaluator.evaluate(ctx.loaded.model, ctx.loaded.tokenizer).to_dict()
    seconds = time.perf_counter() - started
    # Weighed as the run writes it (same writer, same formatting), with and without the rows.
    full, empty = ctx.work_dir / "eval-sample.json", ctx.work_dir / "eval-empty.json"
    write_json_atomic(full, document)
    write_json_atomic(empty, {**document, "examples": []})
    fixed = empty.stat().st_size
    return EvalCost(
        rows_measured=len(sample),
        seconds_per_row=seconds / len(sample),
        bytes_per_row=max(0, full.stat().st_size - fixed) / len(sample),
        fixed_bytes=fixed,
        task=evaluator.procedure.task,
    )
