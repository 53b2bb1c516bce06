"""Scoring a model on preference rows: how often, and by how much, it ranks the chosen answer first.

One procedure for the untrained and the trained model, and for every preference task (dpo,
orpo, kto), so their numbers compare:

- each answer is scored by the log-probability the model gives its tokens after the prompt,
  summed over the answer (`chosen_logp`, `rejected_logp`: means over the pairs);
- `reward_accuracy` is the share of pairs whose chosen answer scores higher (a tie counts
  half), `reward_margin` the mean of chosen minus rejected. An untrained model ranks a pair
  by chance, about 0.5; a model that learnt the preference approaches 1.
- Pairs also carry a reference answer (the chosen one), so the model's greedy answer to each
  prompt is scored as supervised jobs score theirs (loss on the chosen answers, perplexity,
  exact match, token F1).

Unpaired rows (kto data) have no pairs: each desirable completion is ranked against each
undesirable one by its mean per-token log-probability (the answers belong to different
prompts and lengths), `reward_accuracy` being the share ranked right (the ROC AUC).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.eval.language_model_scoring import evaluate_language_model, token_losses
from tunedeck.eval.procedure import EvaluationProcedure
from tunedeck.eval.result import EvaluationResult

PAIR_METRICS = ("reward_accuracy", "reward_margin", "chosen_logp", "rejected_logp")


def evaluate_preference(
    model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure
) -> EvaluationResult:
    """Evaluate `model` on preference `rows` with `procedure` (see the module docstring)."""
    kept, report = _tokenized(rows, tokenizer, procedure)
    if procedure.data_kind == "unpaired_preference":
        metrics, examples = _score_unpaired(model, tokenizer, kept, procedure.batch_size)
        return EvaluationResult(procedure, metrics, examples, report)
    metrics, examples = _score_pairs(model, tokenizer, kept, procedure.batch_size)
    generated = _generation_result(model, tokenizer, rows, procedure)
    by_index = {example["index"]: example for example in examples}
    for example in generated.examples:
        by_index.setdefault(example["index"], {"index": example["index"], "dropped": True}).update(
            {key: value for key, value in example.items() if key != "index"}
        )
    merged = {**generated.metrics, **metrics}
    return EvaluationResult(procedure, merged, sorted(by_index.values(), key=lambda e: e["index"]), report)


def _tokenized(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, procedure: EvaluationProcedure
) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any]]:
    """(row index, tokenized features) of each row the procedure's truncation keeps, and the report."""
    from tunedeck.data.preference_tokens import tokenize_preference_rows

    def tokenized(chosen: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return tokenize_preference_rows(
            chosen, tokenizer, kind=procedure.data_kind, max_length=procedure.max_length,
            max_prompt_length=procedure.max_prompt_length, truncation=procedure.truncation,
        )  # fmt: skip

    features, report = tokenized(rows)
    if len(features) == len(rows):
        return list(enumerate(features)), report
    # Rows were left out: tokenized one at a time, each kept row keeps its index.
    kept: list[tuple[int, dict[str, Any]]] = []
    for index, row in enumerate(rows):
        single, _ = tokenized([row])
        kept.extend((index, feature) for feature in single)
    return kept, report


def answer_logps(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], batch_size: int
) -> tuple[list[float], list[int]]:
    """Summed log-probability of each answer's tokens after its prompt, and the answer's token count."""
    input_ids = [list(prompt) + list(answer) for prompt, answer in zip(prompts, answers, strict=True)]
    labels = [[IGNORE_INDEX] * len(prompt) + list(answer) for prompt, answer in zip(prompts, answers, strict=True)]
    losses, counts = token_losses(model, tokenizer, input_ids, labels, batch_size)
    return [-loss for loss in losses], counts


def _score_pairs(
    model: Any, tokenizer: Any, kept: list[tuple[int, dict[str, Any]]], batch_size: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    prompts = [feature["prompt_ids"] for _, feature in kept]
    chosen, _ = answer_logps(model, tokenizer, prompts, [feature["chosen_ids"] for _, feature in kept], batch_size)
    rejected, _ = answer_logps(model, tokenizer, prompts, [feature["rejected_ids"] for _, feature in kept], batch_size)
    examples = []
    for (index, _), good, bad in zip(kept, chosen, rejected, strict=True):
        examples.append(
            {
                "index": index,
                "chosen_logp": good,
                "rejected_logp": bad,
                "margin": good - bad,
                "correct": good > bad,
            }
        )
    wins = [1.0 if good > bad else 0.5 if good == bad else 0.0 for good, bad in zip(chosen, rejected, strict=True)]
    metrics = {
        "reward_accuracy": fmean(wins) if wins else None,
        "reward_margin": fmean(good - bad for good, bad in zip(chosen, rejected, strict=True)) if wins else None,
        "chosen_logp": fmean(chosen) if chosen else None,
        "rejected_logp": fmean(rejected) if rejected else None,
    }
    return metrics, examples


def _score_unpaired(
    model: Any, tokenizer: Any, kept: list[tuple[int, dict[str, Any]]], batch_size: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    prompts = [feature["prompt_ids"] for _, feature in kept]
    sums, counts = answer_logps(
        model, tokenizer, prompts, [feature["completion_ids"] for _, feature in kept], batch_size
    )
    examples = []
    desirable: list[float] = []
    undesirable: list[float] = []
    for (index, feature), total, count in zip(kept, sums, counts, strict=True):
        per_token = total / count if count else -math.inf
        (desirable if feature["label"] else undesirable).append(per_token)
        examples.append({"index": index, "label": bool(feature["label"]), "logp": total, "logp_per_token": per_token})
    metrics = {
        "reward_accuracy": ranked_right(desirable, undesirable),
        "reward_margin": fmean(desirable) - fmean(undesirable) if desirable and undesirable else None,
        "chosen_logp": fmean(desirable) if desirable else None,
        "rejected_logp": fmean(undesirable) if undesirable else None,
    }
    return metrics, examples


def ranked_right(desirable: Sequence[float], undesirable: Sequence[float]) -> float | None:
    """Share of (desirable, undesirable) pairs where the desirable one scores higher, a tie counting half."""
    if not desirable or not undesirable:
        return None
    ordered = sorted(undesirable)
    score = 0.0
    for value in desirable:
        below, not_above = bisect_left(ordered, value), bisect_right(ordered, value)
        score += below + 0.5 * (not_above - below)
    return score / (len(desirable) * len(undesirable))


def _generation_result(
    model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure
) -> EvaluationResult:
    """The supervised-job scores of each prompt's greedy answer against its chosen answer."""
    from dataclasses import replace

    from tunedeck.data.manifest import content_sha256

    references, kind = chosen_answer_rows(rows)
    generation = replace(
        procedure, task="generation", data_kind=kind, data_sha256=content_sha256(references), max_prompt_length=None
    )
    return evaluate_language_model(model, tokenizer, references, generation)


def chosen_answer_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Preference pairs as supervised rows answering each prompt with its chosen answer, and their kind."""
    if rows and isinstance(rows[0].get("prompt"), list):
        chats = []
        for row in rows:
            chat: dict[str, Any] = {"messages": [*row["prompt"], *row["chosen"]]}
            if row.get("tools"):
                chat["tools"] = row["tools"]
            chats.append(chat)
        return chats, "chat"
    return [{"prompt": str(row["prompt"]), "completion": str(row["chosen"])} for row in rows], "prompt_completion"
