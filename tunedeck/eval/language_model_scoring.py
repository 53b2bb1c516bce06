"""Scoring a model on language-modelling rows: per-example losses on the trained tokens, then decoded answers.

The loss is computed on exactly the tokens training computes its loss on (`tokenize_rows`),
summed per example (`token_losses`); extraction and generation then decode an answer greedily
(`decoding`) and the metric registry scores the predictions (`score_metrics`). Preference
scoring reuses the per-example losses and this evaluation of the chosen answers.

torch and transformers are imported inside the functions: the CLI imports this module's
package without paying for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.eval.decoding import build_prompts, end_of_turn_marker, generate_greedy, stop_token_ids
from tunedeck.eval.metrics import MetricInputs, extraction_metrics, generation_metrics
from tunedeck.eval.procedure import EvaluationProcedure
from tunedeck.eval.registry import compute_metrics
from tunedeck.eval.result import EvaluationResult


def evaluate_language_model(
    model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], procedure: EvaluationProcedure
) -> EvaluationResult:
    """Evaluate `model` on language-modelling `rows`: the loss on their trained tokens, then the decoded answers.

    Answers are decoded and scored only when the procedure decodes (extraction, generation).
    """
    from tunedeck.data.tokenize import encode_rows, tokenize_rows

    length, inputs = procedure.max_length, procedure.train_on_inputs
    if procedure.truncation == "refuse":
        tokenized = tokenize_rows(rows, procedure.data_kind, tokenizer, max_length=length, train_on_inputs=inputs)
    else:
        # Rows training drops stay here with no loss token (their loss is None, the report lists
        # them), so every example keeps its index and the mean loss is over the rows training keeps.
        tokenized = encode_rows(rows, procedure.data_kind, tokenizer, max_length=length, train_on_inputs=inputs,
                                truncation=procedure.truncation)  # fmt: skip
    losses, token_counts = token_losses(model, tokenizer, tokenized.input_ids, tokenized.labels, procedure.batch_size)
    mean_loss = sum(losses) / max(sum(token_counts), 1)
    truncated = set(tokenized.report.truncated_rows)
    examples: list[dict[str, Any]] = [
        {
            "index": index,
            "loss": total / count if count else None,
            "loss_tokens": count,
            "truncated": index in truncated,
        }
        for index, (total, count) in enumerate(zip(losses, token_counts, strict=True))
    ]
    predictions: list[str] = []
    references: list[Any] = []
    if procedure.decodes:
        prompts = build_prompts(rows, procedure.data_kind, tokenizer, max_length=procedure.max_length)
        marker = end_of_turn_marker(tokenizer) if procedure.data_kind == "chat" else None
        outputs = generate_greedy(
            model,
            tokenizer,
            [prompt.ids for prompt in prompts],
            batch_size=procedure.batch_size,
            max_new_tokens=procedure.generation.max_new_tokens,
            stop_ids=stop_token_ids(model, tokenizer, marker),
            marker=marker,
        )
        predictions = [output.text for output in outputs]
        references = [prompt.reference for prompt in prompts]
        for example, prompt, output in zip(examples, prompts, outputs, strict=True):
            example.update(
                reference=prompt.reference,
                prediction=output.text,
                prompt_truncated=prompt.truncated,
                new_tokens=output.new_tokens,
                cut_at_max_new_tokens=not output.stopped,
            )
        _add_example_scores(procedure, examples, predictions, references)
    metrics = score_metrics(procedure, mean_loss, predictions, references)
    return EvaluationResult(procedure, metrics, examples, tokenized.report.to_dict())


def token_losses(
    model: Any,
    tokenizer: Any,
    input_ids: Sequence[Sequence[int]],
    labels: Sequence[Sequence[int]],
    batch_size: int,
) -> tuple[list[float], list[int]]:
    """Per example: the summed cross-entropy over its trained tokens (minus their summed log-probability), and how
    many there are."""
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    sums: list[float] = []
    counts: list[int] = []
    for start in range(0, len(input_ids), batch_size):
        ids = [list(row) for row in input_ids[start : start + batch_size]]
        batch_labels = [list(row) for row in labels[start : start + batch_size]]
        tokens, attention = right_padded(ids, pad, device)
        width = tokens.shape[1]
        targets = torch.tensor([row + [IGNORE_INDEX] * (width - len(row)) for row in batch_labels], device=device)
        with torch.no_grad():
            logits = model(input_ids=tokens, attention_mask=attention).logits.float()
        # Token t is predicted from the logits at t - 1, as in the trainer's loss.
        shifted, expected = logits[:, :-1, :], targets[:, 1:]
        per_token = F.cross_entropy(
            shifted.reshape(-1, shifted.shape[-1]), expected.reshape(-1), ignore_index=IGNORE_INDEX, reduction="none"
        ).view(expected.shape)
        sums.extend(per_token.sum(dim=1).tolist())
        counts.extend((expected != IGNORE_INDEX).sum(dim=1).tolist())
    return sums, counts


def right_padded(ids: list[list[int]], pad: int, device: Any) -> tuple[Any, Any]:
    """A batch of token rows padded on the right with `pad`, and its attention mask, as tensors on `device`."""
    import torch

    width = max(len(row) for row in ids)
    tokens = torch.tensor([row + [pad] * (width - len(row)) for row in ids], device=device)
    attention = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids], device=device)
    return tokens, attention


def _add_example_scores(
    procedure: EvaluationProcedure, examples: list[dict[str, Any]], predictions: list[str], references: list[Any]
) -> None:
    """Per-example verdicts (JSON validity and fields, or exact match and token F1) beside each output."""
    if procedure.task == "extraction":
        report = extraction_metrics(
            predictions, references, required_fields=procedure.required_fields, schema=procedure.json_schema
        )
        for example, scored in zip(examples, report.examples, strict=True):
            details = scored.to_dict()
            details.pop("index")
            example.update(details)
    elif procedure.task == "generation":
        generation = generation_metrics(predictions, references)
        for example, scored_generation in zip(examples, generation.examples, strict=True):
            example.update(exact_match=scored_generation.exact_match, token_f1=scored_generation.token_f1)


def score_metrics(
    procedure: EvaluationProcedure, mean_loss: float, predictions: list[str], references: list[Any]
) -> dict[str, Any]:
    """The procedure's metrics (all the task's, or those it names) from the mean loss and the decoded answers."""
    inputs = MetricInputs(
        task=procedure.task,
        mean_loss=mean_loss,
        predictions=predictions,
        references=references,
        labels=procedure.labels,
        required_fields=procedure.required_fields,
        json_schema=procedure.json_schema,
    )
    names = list(procedure.metric_names) if procedure.metric_names is not None else None
    return compute_metrics(inputs, names)
