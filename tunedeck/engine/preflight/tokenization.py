"""Check 3: tokenization and the loss mask on a few formatted examples (the data layer's inspection).

The whole training split is prepared exactly as the run prepares it (refused rows fail the
check); the first examples are shown token by token, trained or masked, so a template that
trains on the prompt, or masks the answer, is visible before any compute is spent.
Preference data (dpo, orpo, kto) is prepared as those runs prepare it and shown as prompt
and answers (`preference_tokenization`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunedeck.core.errors import TunedeckError
from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult

if TYPE_CHECKING:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.data.inspect import InspectionReport

_TRUNCATION_WARN_SHARE = 0.05


def check_tokenization(ctx: PreflightContext) -> CheckResult:
    """Prepare the data as training does and inspect the first examples' masks."""
    from tunedeck.data.inspect import inspect_examples
    from tunedeck.engine.models.model_loading import load_tokenizer
    from tunedeck.engine.training.task_data import prepare_task_data
    from tunedeck.engine.training.training_data import read_splits

    ctx.resolve()
    ctx.require("resolved")
    config = ctx.config
    try:
        ctx.tokenizer = load_tokenizer(ctx.resolved, config)
    except TunedeckError as error:
        ctx.problems["tokenizer"] = ctx.problems["data"] = str(error)
        return CheckResult(3, "fail", str(error))
    try:
        ctx.data = prepare_task_data(
            config, ctx.tokenizer, ctx.spec.train_path, ctx.spec.validation_path, ctx.spec.cache_dir
        )
        if ctx.preference:
            from tunedeck.engine.preflight.preference_tokenization import preference_tokenization

            return preference_tokenization(ctx)
        train, _ = read_splits(config, ctx.spec.train_path, None)
    except TunedeckError as error:
        ctx.problems["data"] = str(error)
        return CheckResult(3, "fail", str(error), advice=["fix or drop the rows listed, then run preflight again"])
    count = min(ctx.options.sample_examples, len(train.rows))
    inspection = inspect_examples(
        train.rows[:count],
        train.kind,
        ctx.tokenizer,
        max_length=config.max_length,
        n=count,
        train_on_inputs=config.train_on_inputs,
        row_numbers=train.line_numbers[:count],
        truncation=config.truncation,
    )
    examples = [_render(example) for example in inspection.examples]
    report: dict[str, Any] = ctx.data.reports.get("train", {})
    figures = _tokenization_figures(ctx, train, inspection, examples, report)
    if train.kind == "classification":
        figures["label_distribution"] = inspection.label_distribution
        return CheckResult(3, "pass", f"{len(train.rows)} rows tokenized for classification", figures)
    problems = _mask_problems(examples, config, train.kind)
    if problems:
        return CheckResult(3, "fail", "; ".join(problems), figures, ["check the chat template and the loss mask"])
    share = float(report.get("share_truncated") or 0.0)
    data_warnings: list[str] = list(report.get("warnings") or [])
    if data_warnings:
        return CheckResult(3, "warn", "; ".join(data_warnings), figures,
                           ["raise max_length or shorten the inputs to keep every example whole"])
    if share > _TRUNCATION_WARN_SHARE or report.get("lost_part_of_answer"):
        return CheckResult(
            3,
            "warn",
            f"{share:.0%} of rows are truncated at max_length {config.max_length}; "
            f"{report.get('lost_part_of_answer', 0)} lose part of their answer",
            figures,
            [f"raise max_length (p90 length is {inspection.lengths.p90}) or shorten the inputs"],
        )
    return CheckResult(
        3, "pass", f"{len(train.rows)} rows tokenized; the loss mask trains on the answers only", figures
    )


def _tokenization_figures(
    ctx: PreflightContext, train: Any, inspection: InspectionReport, examples: list[dict[str, Any]],
    report: dict[str, Any],
) -> dict[str, Any]:
    """The check's figures: the training rows' kind and lengths, the examples shown, and what truncation did."""
    config = ctx.config
    return {
        "kind": train.kind,
        "rows": len(train.rows),
        "validation_rows": len(ctx.data.validation) if ctx.data.validation is not None else None,
        "max_length": config.max_length,
        "train_on_inputs": config.train_on_inputs,
        "chat_mask_method": inspection.chat_mask_method,
        "examples": examples,
        "share_truncated": report.get("share_truncated"),
        "trainable_token_share": report.get("trainable_token_share"),
        "lost_part_of_answer": report.get("lost_part_of_answer"),
        "truncation": config.truncation,
        "dropped": report.get("dropped"),
        "prompt_cut": report.get("prompt_cut"),
        "system_merged": report.get("system_merged"),
        "lengths": {"p50": inspection.lengths.p50, "p90": inspection.lengths.p90, "max": inspection.lengths.max},
    }


def _mask_problems(examples: list[dict[str, Any]], config: TrainingConfig, kind: str) -> list[str]:
    """The examples whose loss mask trains nothing, or (with train_on_inputs false) trains the prompt too."""
    problems = [
        f"example {e['index']}: no token is trained (the loss mask hides the answer)"
        for e in examples
        # With truncation "drop" such rows are left out of training (and reported below).
        if e["trained_tokens"] == 0 and config.truncation != "drop"
    ]
    if not config.train_on_inputs and kind != "text":
        problems += [
            f"example {e['index']}: every token is trained although train_on_inputs is false "
            "(the template does not mask the prompt)"
            for e in examples
            if e["masked_tokens"] == 0
        ]
    return problems


def _render(example: Any) -> dict[str, Any]:
    """One example as masked/trained text spans (compact enough for the report)."""
    spans: list[dict[str, Any]] = []
    for token in example.tokens:
        if spans and spans[-1]["trained"] == token.trained:
            spans[-1]["text"] += token.text
        else:
            spans.append({"trained": token.trained, "text": token.text})
    trained = example.trained_tokens  # tokens, not displayed groups (a split character is one group)
    return {
        "index": example.index,
        "row_number": example.row_number,
        "tokens": example.kept,
        "trained_tokens": trained,
        "masked_tokens": example.kept - trained,
        "truncated": example.truncated,
        "spans": spans,
    }
