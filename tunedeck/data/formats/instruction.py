"""Instruction rows: `prompt_completion`, `alpaca` and `extraction`, an instruction and the answer to learn.

Alpaca rows are chat rows, so a model is trained through its own chat template, the same
one `generate`, the playground and evaluation prompt it with. As LLaMA-Factory reads them:
the `system` message when given, one user turn of `instruction` and `input` joined by a
newline (the input only when non-empty), then the `output` as the trained assistant turn;
a row's `history` pairs come first as earlier user/assistant turns. A row without history
also keeps `plain_prompt`, the fixed Stanford prompt (`ALPACA_TEMPLATE`), which the
tokenization uses instead for a tokenizer without a chat template. The tokenizer is not
known here, so the canonical row carries both forms: its hash depends on the row only.

A `prompt_completion` row with text fields stays `{"prompt", "completion"}`; with lists of
messages it is a chat row (see `chat.normalise_conversational`). An `extraction` row is
`{"input", "output"}`, the output a JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tunedeck.core.dataset_vocabulary import PLAIN_PROMPT_FIELD
from tunedeck.core.errors import Issue
from tunedeck.data.formats.chat import normalise_conversational
from tunedeck.data.formats.field_readers import Row, decode_cell, describe, read_text

ALPACA_PREAMBLE: Final[str] = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request."
)


ALPACA_PREAMBLE_WITH_INPUT: Final[str] = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request."
)


ALPACA_TEMPLATE: Final[str] = "{system}\n\n### Instruction:\n{instruction}\n\n### Response:\n"
"""The `plain_prompt` of an Alpaca row without `input` (or with an empty one).

`{system}` is the row's `system` when given, else `ALPACA_PREAMBLE`. For a tokenizer
without a chat template the row trains as this prompt then the row's `output`, unchanged;
the loss is computed on the output only.
"""


ALPACA_TEMPLATE_WITH_INPUT: Final[str] = (
    "{system}\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
)
"""The `plain_prompt` of an Alpaca row with a non-empty `input`.

`{system}` is the row's `system` when given, else `ALPACA_PREAMBLE_WITH_INPUT`.
"""


def _optional_text(record: Mapping[str, Any], key: str, issues: list[Issue]) -> str:
    """The string at `key`, or "" when it is absent or null (pandas and Parquet exports write null)."""
    if record.get(key) is None:
        return ""
    return read_text(record, key, issues, required=False) or ""


def normalise_prompt_completion(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """A `prompt_completion` row: two texts, or two lists of messages (a chat row)."""
    prompt, completion = record.get("prompt"), record.get("completion")
    if tabular:
        # A CSV cell holds a message list as JSON text; only both fields decoding to lists make it one,
        # so a text prompt that merely starts with "[" stays text.
        decoded = decode_cell(prompt, tabular), decode_cell(completion, tabular)
        if all(isinstance(value, list) for value in decoded):
            prompt, completion = decoded
    if isinstance(prompt, list) or isinstance(completion, list):
        return normalise_conversational(prompt, completion, tabular)
    issues: list[Issue] = []
    prompt = read_text(record, "prompt", issues)
    completion = read_text(record, "completion", issues)
    return ({"prompt": prompt, "completion": completion} if not issues else None), issues


def _alpaca_history(value: Any, issues: list[Issue]) -> list[tuple[str, str]]:
    """LLaMA-Factory's `history`: a list of `[instruction, output]` pairs of earlier turns."""
    if value is None:
        return []
    if not isinstance(value, list):
        issues.append(
            Issue("wrong type", field="history", expected="a list of [instruction, output] pairs",
                  found=describe(value))
        )  # fmt: skip
        return []
    pairs: list[tuple[str, str]] = []
    for index, pair in enumerate(value):
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(part, str) and part.strip() for part in pair)
        ):
            issues.append(
                Issue(
                    "wrong type",
                    field=f"history[{index}]",
                    expected="a pair [instruction, output] of non-empty strings",
                    found=describe(pair),
                )
            )
            continue
        pairs.append((pair[0], pair[1]))
    return pairs


def normalise_alpaca(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """An Alpaca row as a chat row, with its `plain_prompt` when it has no history."""
    issues: list[Issue] = []
    instruction = read_text(record, "instruction", issues)
    output = read_text(record, "output", issues)
    extra = _optional_text(record, "input", issues)
    system = _optional_text(record, "system", issues)
    with_history = "history" in record
    history = _alpaca_history(decode_cell(record.get("history"), tabular), issues) if with_history else []
    if issues or instruction is None or output is None:
        return None, issues
    # Read as LLaMA-Factory does: the system prompt, the earlier pairs as user/assistant turns,
    # then instruction and input joined by a newline. Every assistant turn is trained, history
    # answers included, as LLaMA-Factory does by default (its `mask_history` is off).
    messages: list[Row] = [{"role": "system", "content": system}] if system.strip() else []
    for query, answer in history:
        messages += [{"role": "user", "content": query}, {"role": "assistant", "content": answer}]
    query = "\n".join(part for part in (instruction, extra) if part.strip())
    messages += [{"role": "user", "content": query}, {"role": "assistant", "content": output}]
    if history:
        # The Stanford template has no earlier turns: such a row needs the model's chat template.
        return {"messages": messages}, issues
    return {"messages": messages, PLAIN_PROMPT_FIELD: alpaca_prompt(instruction, extra, system)}, issues


def alpaca_prompt(instruction: str, extra: str = "", system: str = "") -> str:
    """The fixed Stanford Alpaca prompt (`ALPACA_TEMPLATE`): what a model without a chat template is trained on.

    `extra` is the row's `input` (shown only when non-blank); an empty `system` takes the
    Stanford preamble.
    """
    if extra.strip():
        return ALPACA_TEMPLATE_WITH_INPUT.format(
            system=system if system else ALPACA_PREAMBLE_WITH_INPUT, instruction=instruction, input=extra
        )
    return ALPACA_TEMPLATE.format(system=system if system else ALPACA_PREAMBLE, instruction=instruction)


def normalise_extraction(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """An `extraction` row: the `input` text and its `output` JSON object (JSON text in a CSV cell)."""
    issues: list[Issue] = []
    text = read_text(record, "input", issues)
    output = decode_cell(record.get("output"), tabular)
    if not isinstance(output, dict):
        issues.append(
            Issue(
                "missing field" if "output" not in record else "wrong type",
                field="output",
                expected="a JSON object",
                found=describe(output),
            )
        )
    return ({"input": text, "output": output} if not issues else None), issues
