"""Preference rows → the token ids TRL's preference trainers train on, truncated by our rules.

Rendering is TRL's own (its DPO and KTO trainers' dataset preparation), so the ids equal what
they would make of the same rows:

* conversational rows: the tokenizer's chat template of the prompt with the generation prompt,
  and of the prompt followed by each answer (with the row's `tools`); a tokenizer without a
  chat template is refused (`require_chat_template`).
* standard rows: plain tokenization of the prompt and of prompt + answer, the tokenizer's EOS
  appended to each answer that does not end with it.

The prompt ends where the prompt's ids and each prompt+answer's ids diverge (their common
prefix); each answer is the rest of its prompt+answer.

Truncation, in this order: with `max_prompt_length`, a longer prompt is cut to
`max_prompt_length` tokens from the left: it keeps its last tokens, and a leading BOS stays
first (counted in the `max_prompt_length`); then each answer keeps its first
`max_length - len(prompt)` tokens. A row with an answer left without any token trains on
nothing; the `truncation` mode decides: `refuse` stops with a DataError naming the rows,
`drop` leaves them out and names them in the report, `truncate_prompt` cuts the prompt from
the left (keeping BOS and at least one more token) until each answer keeps as many tokens as fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.chat_render import require_chat_template
from tunedeck.data.formats.preference import ANSWER_FIELDS, is_conversational
from tunedeck.data.tokenize import TRUNCATION_MODES, row_label

_MAX_LISTED_ROWS: Final[int] = 20


@dataclass
class FittedRow:
    """One row's ids after truncation, and what truncation did to it."""

    prompt: list[int]
    answers: dict[str, list[int]]  # answer field → ids, in `ANSWER_FIELDS` order
    prompt_length: int  # before truncation
    answer_lengths: dict[str, int]  # before truncation
    empty_before: bool  # an answer had no token even before truncation
    prompt_moved: int = 0  # tokens of the prompt alone that its rendering before an answer does not share

    @property
    def prompt_cut(self) -> int:
        """Prompt tokens truncation removed."""
        return self.prompt_length - len(self.prompt)

    def answer_cut(self, name: str) -> int:
        """Tokens truncation removed from answer `name`."""
        return self.answer_lengths[name] - len(self.answers[name])

    @property
    def empty(self) -> bool:
        """Whether an answer is left without any token: the row trains on nothing."""
        return any(not ids for ids in self.answers.values())


def _common_prefix_length(ids: Sequence[int], other: Sequence[int]) -> int:
    """Leading tokens two id lists share (TRL's `common_prefix_length`)."""
    length = 0
    for a, b in zip(ids, other, strict=False):
        if a != b:
            break
        length += 1
    return length


def _ids(encoded: Any) -> list[int]:
    return [int(token) for token in encoded["input_ids"]]


def render_preference_row(row: Mapping[str, Any], tokenizer: Any,
                          kind: str) -> tuple[list[int], dict[str, list[int]], int]:
    """The untruncated prompt ids and each answer's ids of one canonical row, rendered as TRL renders it.

    The third value counts the tokens of the prompt rendered alone that its rendering before an
    answer does not share: then training sees a context that differs from the one the model is
    prompted with (a template that renders the prompt alone differently, tokens merging at the seam).
    """
    answers = ANSWER_FIELDS[kind]
    if is_conversational(row):
        require_chat_template(tokenizer)
        tools = row.get("tools")
        prompt = _ids(tokenizer.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True,
                                                    tokenize=True, return_dict=True))
        whole = [_ids(tokenizer.apply_chat_template([*row["prompt"], *row[name]], tools=tools, tokenize=True,
                                                    return_dict=True)) for name in answers]
    else:
        eos = tokenizer.eos_token
        texts = [str(row[name]) for name in answers]
        if eos is not None:
            texts = [text if text.endswith(eos) else text + eos for text in texts]
        prompt = _ids(tokenizer(text=str(row["prompt"])))
        whole = [_ids(tokenizer(text=str(row["prompt"]) + text)) for text in texts]
    # The answer starts where prompt and prompt+answer diverge, which is not always after the
    # prompt: a template may render the prompt alone differently, or tokens merge at the seam.
    end = min(_common_prefix_length(prompt, ids) for ids in whole)
    return prompt[:end], {name: ids[end:] for name, ids in zip(answers, whole, strict=True)}, len(prompt) - end


def leading_specials(tokenizer: Any, prompt: Sequence[int]) -> int:
    """1 when `prompt` starts with the tokenizer's BOS (kept first by every cut), else 0."""
    bos = getattr(tokenizer, "bos_token_id", None)
    return 1 if bos is not None and prompt and prompt[0] == bos else 0


def _keep_end(prompt: list[int], keep: int, head: int) -> list[int]:
    """The prompt's leading specials and its last `keep - head` tokens (all of it when short enough)."""
    if len(prompt) <= keep:
        return prompt
    return prompt[:head] + prompt[len(prompt) - (keep - head):]


def fit_row(prompt: list[int], answers: dict[str, list[int]], *, head: int, max_length: int,
            max_prompt_length: int | None, cut_prompt: bool) -> FittedRow:
    """Truncate one rendered row (see the module doc); `cut_prompt` is the truncate_prompt mode."""
    lengths = {name: len(ids) for name, ids in answers.items()}
    fitted = prompt
    if max_prompt_length is not None:
        fitted = _keep_end(fitted, max(max_prompt_length, head + 1), head)
    room = max_length - len(fitted)
    if cut_prompt and any(lengths.values()) and room < 1:
        # Cut from the left so the longest answer fits, keeping BOS and one more prompt token.
        fewest = min(len(fitted), head + 1)
        fitted = _keep_end(fitted, max(fewest, max_length - max(lengths.values())), head)
        room = max_length - len(fitted)
    kept = {name: ids[: max(room, 0)] for name, ids in answers.items()}
    return FittedRow(fitted, kept, len(prompt), lengths, not all(lengths.values()))


def _features(fitted: FittedRow, row: Mapping[str, Any], kind: str) -> dict[str, Any]:
    if kind == "preference":
        return {"prompt_ids": fitted.prompt, "chosen_ids": fitted.answers["chosen"],
                "rejected_ids": fitted.answers["rejected"]}
    return {"prompt_ids": fitted.prompt, "completion_ids": fitted.answers["completion"], "label": bool(row["label"])}


def _check_arguments(kind: str, max_length: int, max_prompt_length: int | None, truncation: str) -> None:
    if kind not in ANSWER_FIELDS:
        raise ValueError(f"kind {kind!r} is not a preference kind; expected one of {tuple(ANSWER_FIELDS)}")
    if max_length < 2:
        raise ValueError("max_length must be at least 2")
    if max_prompt_length is not None and max_prompt_length < 1:
        raise ValueError("max_prompt_length must be at least 1")
    if truncation not in TRUNCATION_MODES:
        raise ValueError(f"truncation {truncation!r} is unknown; expected one of {TRUNCATION_MODES}")


def fit_rows(rows: Sequence[Mapping[str, Any]], tokenizer: Any, *, kind: str, max_length: int,
             max_prompt_length: int | None, truncation: str) -> list[FittedRow]:
    """Render and truncate every row, refusing and dropping nothing (inspection shows what is wrong)."""
    _check_arguments(kind, max_length, max_prompt_length, truncation)
    fitted = []
    for row in rows:
        prompt, answers, moved = render_preference_row(row, tokenizer, kind)
        fitted.append(fit_row(prompt, answers, head=leading_specials(tokenizer, prompt), max_length=max_length,
                              max_prompt_length=max_prompt_length, cut_prompt=truncation == "truncate_prompt"))
        fitted[-1].prompt_moved = moved
    return fitted


def _stats(values: Sequence[int]) -> dict[str, float]:
    return {"max": max(values, default=0), "mean": sum(values) / len(values) if values else 0.0}


def preference_report(fitted: Sequence[FittedRow], *, kind: str, max_length: int, max_prompt_length: int | None,
                      truncation: str, dropped: Sequence[int] = (),
                      dropped_names: Sequence[str] = ()) -> dict[str, Any]:
    """The report of a tokenization: rows, kept rows, what truncation cut, token totals and lengths."""
    answers = ANSWER_FIELDS[kind]
    left_out = set(dropped)
    kept = [row for index, row in enumerate(fitted) if index not in left_out]
    total_tokens = sum(len(row.prompt) + sum(len(ids) for ids in row.answers.values()) for row in kept)
    trainable = sum(len(ids) for row in kept for ids in row.answers.values())
    truncated = [i for i, row in enumerate(fitted) if row.prompt_cut or any(row.answer_cut(n) for n in answers)]
    prompts_cut = [row for row in fitted if row.prompt_cut]
    warnings = []
    if dropped:
        names = ", ".join(dropped_names[:_MAX_LISTED_ROWS])
        more = len(dropped) - min(len(dropped_names), _MAX_LISTED_ROWS)
        warnings.append(f"{len(dropped)} example(s) left out: an answer has no token left after truncation at "
                        f"max_length {max_length} ({names}" + (f" and {more} more" if more > 0 else "") + ")")
    if prompts_cut:
        warnings.append(f"{len(prompts_cut)} example(s) had {sum(r.prompt_cut for r in prompts_cut)} prompt "
                        "token(s) cut from the left"
                        + (f" (max_prompt_length {max_prompt_length})" if max_prompt_length is not None else ""))
    moved = sum(1 for row in fitted if row.prompt_moved)
    if moved:
        warnings.append(f"{moved} example(s): the prompt rendered alone is not the start of the prompt rendered "
                        "before an answer (the chat template renders it differently, or tokens merge at the seam); "
                        "the answer starts where they diverge, as in TRL's trainers")
    lengths = {"prompt": _stats([row.prompt_length for row in fitted])}
    lengths.update({name: _stats([row.answer_lengths[name] for row in fitted]) for name in answers})
    return {
        "kind": kind,
        "max_length": max_length,
        "max_prompt_length": max_prompt_length,
        "truncation": truncation,
        "total": len(fitted),
        "rows_kept": len(kept),
        "truncated": len(truncated),
        "share_truncated": len(truncated) / len(fitted) if fitted else 0.0,
        "truncated_rows": truncated[:100],
        "truncated_prompts": len(prompts_cut),
        "prompt_tokens_cut": sum(row.prompt_cut for row in prompts_cut),
        "truncated_answers": sum(1 for row in fitted for name in answers if row.answer_cut(name)),
        "empty_rows": [i for i, row in enumerate(fitted) if row.empty][:100],
        "prompt_boundary_moved": moved,
        "total_tokens": total_tokens,
        "trainable_tokens": trainable,
        "trainable_token_share": trainable / total_tokens if total_tokens else 0.0,
        "dropped": len(dropped),
        "dropped_rows": list(dropped)[:100],
        "dropped_row_names": list(dropped_names)[:100],
        "lengths": lengths,
        "warnings": warnings,
    }


def _empty_issue(fitted: FittedRow, label: str, line: int | None, file: str | None, max_length: int) -> Issue:
    if fitted.empty_before:
        return Issue(f"{label}: an answer has no token of its own (it renders as part of the prompt)",
                     file=file, line=line, field="max_length", expected="answers that add tokens after the prompt",
                     found=", ".join(f"{name} {n} tokens" for name, n in fitted.answer_lengths.items()))
    return Issue(f"{label}: the prompt fills max_length {max_length}, so no answer token is left to train on",
                 file=file, line=line, field="max_length",
                 expected=f"a prompt shorter than max_length {max_length} (raise max_length, set "
                 "max_prompt_length, or truncation drop or truncate_prompt)",
                 found=f"a prompt of {len(fitted.prompt)} tokens")


def tokenize_preference_rows(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    kind: str,
    max_length: int,
    max_prompt_length: int | None,
    truncation: str,
    file: str | None = None,
    row_numbers: Sequence[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tokenize canonical preference rows as TRL does and truncate them (see the module doc).

    Returns one feature dict per kept row: `prompt_ids`, `chosen_ids`, `rejected_ids` for
    kind `preference`; `prompt_ids`, `completion_ids`, `label` for `unpaired_preference`; and
    the report (`preference_report`). `row_numbers` (1-based lines of `file`) make errors point
    into the file. Raises DataError naming rows left with an empty answer (up to 20, then a
    count), unless `truncation` is "drop"; a conversational row with a tokenizer that has no
    chat template is refused.
    """
    fitted = fit_rows(rows, tokenizer, kind=kind, max_length=max_length, max_prompt_length=max_prompt_length,
                      truncation=truncation)
    empty = [i for i, row in enumerate(fitted) if row.empty]
    names = [row_label(i, row_numbers, file) for i in empty]
    if empty and truncation != "drop":
        issues = [_empty_issue(fitted[i], names[n], row_numbers[i] if row_numbers else None, file, max_length)
                  for n, i in enumerate(empty[:_MAX_LISTED_ROWS])]
        if len(empty) > _MAX_LISTED_ROWS:
            issues.append(Issue(f"and {len(empty) - _MAX_LISTED_ROWS} more row(s) like these", file=file))
        raise DataError(issues, title=f"{len(empty)} example(s) would train on no answer token")
    dropped = set(empty)
    features = [_features(row, rows[i], kind) for i, row in enumerate(fitted) if i not in dropped]
    report = preference_report(fitted, kind=kind, max_length=max_length, max_prompt_length=max_prompt_length,
                               truncation=truncation, dropped=empty, dropped_names=names)
    return features, report


def preference_token_spans(
    row: Mapping[str, Any],
    tokenizer: Any,
    *,
    kind: str,
    max_length: int,
    max_prompt_length: int | None,
    truncation: str = "refuse",
) -> dict[str, Any]:
    """One row's spans for inspection: for the prompt and each answer its kept ids, their tokens, and how many were cut.

    `{"prompt": {"ids", "tokens", "cut"}, "chosen": {...}, "rejected": {...}}` (or `"completion"`
    and `"label"` for unpaired rows), plus `"empty"`: whether an answer is left without a token.
    `truncation` "truncate_prompt" shows the prompt cut that mode makes.
    """
    _check_arguments(kind, max_length, max_prompt_length, truncation)
    prompt, answers, _ = render_preference_row(row, tokenizer, kind)
    fitted = fit_row(prompt, answers, head=leading_specials(tokenizer, prompt), max_length=max_length,
                     max_prompt_length=max_prompt_length, cut_prompt=truncation == "truncate_prompt")
    out: dict[str, Any] = {"prompt": _span(tokenizer, fitted.prompt, fitted.prompt_cut)}
    for name in ANSWER_FIELDS[kind]:
        out[name] = _span(tokenizer, fitted.answers[name], fitted.answer_cut(name))
    if kind == "unpaired_preference":
        out["label"] = bool(row["label"])
    out["empty"] = fitted.empty
    return out


def _span(tokenizer: Any, ids: list[int], cut: int) -> dict[str, Any]:
    return {"ids": ids, "tokens": [str(token) for token in tokenizer.convert_ids_to_tokens(ids)], "cut": cut}
