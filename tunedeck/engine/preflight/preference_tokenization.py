"""Check 3 for preference tasks: the first examples as prompt and answers, and what truncation did to them.

A preference example trains on its answers only, by construction: the prompt is a separate
column the trainer never computes a loss on. What can go wrong is an answer left empty (by
truncation, or an empty cell: the pair then compares nothing) and answers cut short by
`max_length`; the examples are shown with each part's tokens so both are visible before any
compute is spent.
"""

from __future__ import annotations

from typing import Any

from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.training_data import example_answers, example_length, example_tokens

_TRUNCATION_WARN_SHARE = 0.05
_SHOWN_CHARACTERS = 400


def preference_tokenization(ctx: PreflightContext) -> CheckResult:
    """The check's result for the preference data already prepared in `ctx.data`."""
    config = ctx.config
    kind = ctx.data.kind
    rows = next(
        (int(m["rows"]) for m in ctx.data.manifests if m.get("role") == "train" and "rows" in m),
        len(ctx.data.train),
    )
    features = ctx.data.train.features
    report: dict[str, Any] = ctx.data.reports.get("train", {})
    shown = [_render(ctx, index, feature) for index, feature in enumerate(features[: ctx.options.sample_examples])]
    lengths = sorted(example_length(feature) for feature in features)
    figures: dict[str, Any] = {
        "kind": kind,
        "task": config.task,
        "rows": rows,
        "examples": len(features),  # kto trains on each pair's two completions as two examples
        "validation_examples": len(ctx.data.validation) if ctx.data.validation is not None else None,
        "max_length": config.max_length,
        "max_prompt_length": config.max_prompt_length,
        "truncation": config.truncation,
        "tokens": ctx.data.train.token_count(),  # prompt + chosen + rejected (or + completion) per example
        "shown": shown,
        "lengths": _percentiles(lengths),
        "report": report,
    }
    empty = [
        f"example {example['index']}: the {answer} answer has no token left"
        for example in shown
        for answer, count in example["answer_tokens"].items()
        if count == 0
    ]
    empty_anywhere = sum(1 for feature in features if any(not feature[column] for column in example_answers(feature)))
    if empty or empty_anywhere:
        message = "; ".join(empty) or f"{empty_anywhere} examples have an answer with no token left"
        advice = "raise max_length or lower max_prompt_length so every answer keeps tokens"
        return CheckResult(3, "fail", message, figures, [advice])
    warnings = list(report.get("warnings") or [])
    share = float(report.get("share_truncated") or 0.0)
    if warnings or share > _TRUNCATION_WARN_SHARE:
        message = "; ".join(warnings) or f"{share:.0%} of rows are truncated at max_length {config.max_length}"
        advice = f"raise max_length (p90 length is {figures['lengths']['p90']}) or shorten the rows"
        return CheckResult(3, "warn", message, figures, [advice])
    return CheckResult(
        3, "pass", f"{rows} rows tokenized for {config.task}: {len(features)} examples, answers trained only", figures
    )


def _render(ctx: PreflightContext, index: int, feature: dict[str, Any]) -> dict[str, Any]:
    """One example as its prompt and answers: token counts and the decoded text (shortened)."""
    decode = ctx.tokenizer.decode
    answers = {column.removesuffix("_ids"): list(feature[column]) for column in example_answers(feature)}
    shown: dict[str, Any] = {
        "index": index,
        "prompt_tokens": len(feature["prompt_ids"]),
        "answer_tokens": {name: len(ids) for name, ids in answers.items()},
        "tokens": example_tokens(feature),
        "prompt": _short(decode(list(feature["prompt_ids"]), skip_special_tokens=False)),
        **{name: _short(decode(ids, skip_special_tokens=False)) for name, ids in answers.items()},
    }
    if "label" in feature:
        shown["desirable"] = bool(feature["label"])
    return shown


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 1] + "…"


def _percentiles(lengths: list[int]) -> dict[str, int | None]:
    if not lengths:
        return {"p50": None, "p90": None, "max": None}
    return {
        "p50": lengths[len(lengths) // 2],
        "p90": lengths[min(len(lengths) - 1, int(len(lengths) * 0.9))],
        "max": lengths[-1],
    }
