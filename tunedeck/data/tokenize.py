"""Canonical rows → token ids and labels: templates, loss masks and truncation.

The templates (version `TEMPLATE_VERSION`; bump it when any of them changes, the cache key
includes it):

* `text`: `[specials the tokenizer puts first] + text + [eos]`; loss on every token.
* `prompt_completion`: `[leading specials] + prompt + completion + [eos]`, prompt and completion tokenized
  separately so the boundary is exact and matches inference (the prompt is encoded alone,
  the model continues it). The prompt is used verbatim: put any separator in it.
  Loss on completion and eos only, unless `train_on_inputs`.
* `extraction`: as prompt/completion with prompt = `input` and completion =
  `canonical_json(output)`.
* `chat`: the tokenizer's own chat template (`chat_render`), given the row's `tools`; loss on
  assistant answers only (not those with `weight` 0), unless `train_on_inputs`. Alpaca rows
  are chat rows; for a tokenizer without a chat template they train as prompt/completion
  rows instead, prompt = their `plain_prompt` (the Stanford template), completion = the
  answer (`plain_prompt_rows`). Other chat rows need a chat template.

The first token never has a label: no earlier token predicts it, so marking it trained would
misreport what the loss sees. Rows longer than `max_length` keep their first `max_length`
tokens; every cut is counted. What happens to a row left without any trained token is the
`truncation` mode (`TRUNCATION_MODES`):

* `refuse` (default): the job stops, naming the rows.
* `drop`: the rows are left out; the report lists them (`dropped_rows`) and says so in `warnings`.
* `truncate_prompt`: before cutting at the right, the tokens before the answer that would be
  lost are cut from the left, after the leading special tokens (BOS): the prompt for
  prompt/completion and extraction rows, earlier turns for chat rows. An answer longer than
  `max_length` on its own keeps its first tokens. With `train_on_inputs` every token is an
  answer token, so nothing is cut from the left.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.dataset_vocabulary import PLAIN_PROMPT_FIELD
from tunedeck.core.errors import DataError, Issue
from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.data.chat_render import chat_template_of, render_chats, require_chat_template
from tunedeck.data.task_kinds import SFT_KINDS

TEMPLATE_VERSION = "4"
TRUNCATION_MODES = ("refuse", "drop", "truncate_prompt")
_MAX_LISTED_ROWS = 20


@dataclass
class TruncationReport:
    """What truncation at `max_length` did to a dataset."""

    max_length: int
    total: int = 0
    truncated: int = 0
    lost_part_of_answer: int = 0
    lost_all_answer: int = 0
    no_answer: int = 0  # rows without any trained token even before truncation
    total_tokens: int = 0  # after truncation
    trainable_tokens: int = 0  # after truncation
    lengths: list[int] = field(default_factory=list)  # before truncation
    truncated_rows: list[int] = field(default_factory=list)  # 0-based indices
    refused_rows: list[int] = field(default_factory=list)  # 0-based: no trained token left
    truncation: str = "refuse"  # the mode that applied (TRUNCATION_MODES)
    prompt_cut: int = 0  # rows whose prompt / earlier turns were cut from the left (truncate_prompt)
    prompt_tokens_cut: int = 0
    dropped_rows: list[int] = field(default_factory=list)  # 0-based indices left out (drop)
    dropped_row_names: list[str] = field(default_factory=list)  # how errors name them ("data.jsonl:7")
    system_merged: int = 0  # chat rows whose system text went into the first user turn

    @property
    def warnings(self) -> list[str]:
        """What was changed or left out of the data, in words (empty when nothing was)."""
        out = []
        if self.dropped_rows:
            names = ", ".join(self.dropped_row_names[:_MAX_LISTED_ROWS])
            more = len(self.dropped_rows) - min(len(self.dropped_row_names), _MAX_LISTED_ROWS)
            out.append(f"{len(self.dropped_rows)} example(s) left out: no token would be trained after "
                       f"truncation at max_length {self.max_length} ({names}"
                       + (f" and {more} more" if more > 0 else "") + ")")
        if self.prompt_cut:
            out.append(f"{self.prompt_cut} example(s) had {self.prompt_tokens_cut} prompt token(s) cut from the "
                       f"left to keep the answer within max_length {self.max_length}")
        if self.system_merged:
            out.append(f"{self.system_merged} chat example(s): the chat template refuses a system message, so "
                       "the system text was put at the start of the first user message")
        return out

    @property
    def trainable_token_share(self) -> float:
        """Trained tokens / all tokens kept, after truncation (0 for an empty dataset)."""
        return self.trainable_tokens / self.total_tokens if self.total_tokens else 0.0

    @property
    def share_truncated(self) -> float:
        """Rows cut / rows."""
        return self.truncated / self.total if self.total else 0.0

    def to_dict(self, include_lengths: bool = False) -> dict[str, Any]:
        """JSON-ready summary; per-row lengths only on request (one int per row)."""
        out: dict[str, Any] = {
            "max_length": self.max_length,
            "total": self.total,
            "truncated": self.truncated,
            "share_truncated": self.share_truncated,
            "lost_part_of_answer": self.lost_part_of_answer,
            "lost_all_answer": self.lost_all_answer,
            "no_answer": self.no_answer,
            "total_tokens": self.total_tokens,
            "trainable_tokens": self.trainable_tokens,
            "trainable_token_share": self.trainable_token_share,
            "truncated_rows": self.truncated_rows[:100],
            "refused_rows": self.refused_rows[:100],
            "truncation": self.truncation,
            "prompt_cut": self.prompt_cut,
            "prompt_tokens_cut": self.prompt_tokens_cut,
            "dropped": len(self.dropped_rows),
            "dropped_rows": self.dropped_rows[:100],
            "dropped_row_names": self.dropped_row_names[:100],
            "system_merged": self.system_merged,
            "warnings": self.warnings,
        }
        if include_lengths:
            out["lengths"] = list(self.lengths)
        return out


@dataclass
class TokenizedRows:
    """Token ids and labels (IGNORE_INDEX where no loss is computed), one list per row."""

    kind: str
    input_ids: Sequence[list[int]]  # lists when freshly tokenized, `RaggedRows` when read from the cache
    labels: Sequence[list[int]]
    report: TruncationReport
    chat_mask_method: str | None = None

    def __len__(self) -> int:
        return len(self.input_ids)


def canonical_json(value: Any) -> str:
    """The extraction target text: keys sorted, non-ASCII kept, so equal objects give equal text."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def prompt_completion_texts(rows: Sequence[Mapping[str, Any]], kind: str) -> tuple[list[str], list[str]]:
    """Prompts and completions of prompt_completion or extraction rows (what inference sees)."""
    if kind == "prompt_completion":
        return [str(r["prompt"]) for r in rows], [str(r["completion"]) for r in rows]
    if kind == "extraction":
        return [str(r["input"]) for r in rows], [canonical_json(r["output"]) for r in rows]
    raise ValueError(f"kind {kind!r} has no prompt/completion form")


def plain_prompt_rows(rows: Sequence[Mapping[str, Any]], tokenizer: Any,
                      row_labels: Sequence[str] | None = None) -> list[dict[str, str]] | None:
    """Chat rows as prompt/completion rows when `tokenizer` has no chat template, else None.

    Only rows with a `plain_prompt` (Alpaca rows) have that form: prompt = `plain_prompt`,
    completion = the final assistant answer. Any other row is a DataError naming it, with
    the reason: it needs a chat template. `row_labels` names rows in that error.
    """
    if chat_template_of(tokenizer) is not None:
        return None
    missing = [index for index, row in enumerate(rows) if not row.get(PLAIN_PROMPT_FIELD)]
    if not missing:
        return [{"prompt": str(row[PLAIN_PROMPT_FIELD]), "completion": str(row["messages"][-1].get("content") or "")}
                for row in rows]
    if len(missing) == len(rows):
        require_chat_template(tokenizer)  # raises the usual error: no row has a plain form
    names = [row_labels[i] if row_labels is not None else f"row {i + 1}" for i in missing[:_MAX_LISTED_ROWS]]
    raise DataError(
        [Issue(f"{name}: this conversation needs a chat template (only Alpaca rows without history have a "
               "plain prompt)", field="messages", expected="a tokenizer with a chat template")
         for name in names],
        title=f"{len(missing)} row(s) cannot be rendered without a chat template",
    )


def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens, in one batched call.

    Goes straight to the fast tokenizer's backend when that is equivalent (no truncation or
    padding configured on it, special tokens not split): transformers' per-row conversion
    of each result costs about as much as the encoding itself.
    """
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if (backend is not None and backend.truncation is None and backend.padding is None
            and not getattr(tokenizer, "split_special_tokens", False)):
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
        probe = list(texts[:8])
        # A tokenizer class may preprocess text before its backend sees it: then stay on the slow road.
        if [e.ids for e in encode(probe, add_special_tokens=False)] == _encode_with_wrapper(tokenizer, probe):
            return [encoding.ids for encoding in encode(list(texts), add_special_tokens=False)]
    return _encode_with_wrapper(tokenizer, texts)


def _encode_with_wrapper(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def special_affixes(tokenizer: Any) -> tuple[list[int], list[int]]:
    """Token ids the tokenizer adds before and after a text with `add_special_tokens=True`."""
    bare = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    full = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    return [], []


def row_label(index: int, row_numbers: Sequence[int] | None, source: str | None) -> str:
    """How errors name a row: `file:line` when known, else `row N` (1-based)."""
    number = row_numbers[index] if row_numbers is not None else index + 1
    if source:
        return f"{source}:{number}"
    return f"row {number}" if row_numbers is None else f"line {number}"


def encode_rows(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    tokenizer: Any,
    *,
    max_length: int,
    train_on_inputs: bool = False,
    row_numbers: Sequence[int] | None = None,
    source: str | None = None,
    force_incremental_chat: bool = False,
    truncation: str = "refuse",
) -> TokenizedRows:
    """Tokenize, mask and truncate without refusing or dropping anything (inspection shows what is wrong).

    `truncation` "truncate_prompt" cuts the prompt from the left first (see the module doc);
    the other modes only matter to `tokenize_rows`, the training entry point, which refuses
    or drops rows left without a trained token.
    """
    if max_length < 2:
        raise ValueError("max_length must be at least 2")
    if truncation not in TRUNCATION_MODES:
        raise ValueError(f"truncation {truncation!r} is unknown; expected one of {TRUNCATION_MODES}")
    cut_prompt = truncation == "truncate_prompt"
    if kind not in SFT_KINDS:
        raise ValueError(f"kind {kind!r} is not a language-modelling kind; expected one of {SFT_KINDS}")
    eos = tokenizer.eos_token_id
    tail = [eos] if eos is not None else []
    chat_method = None
    system_merged = 0
    if kind == "text":
        head, _ = special_affixes(tokenizer)
        texts = [str(r["text"]) for r in rows]
        with _gc_paused():
            ids = [head + body + tail for body in encode_texts(tokenizer, texts)]
            return _truncate_suffix(kind, ids, [0] * len(ids), max_length, len(head), truncation)
    labels_for_error = [row_label(i, row_numbers, source) for i in range(len(rows))] if kind == "chat" else []
    plain = plain_prompt_rows(rows, tokenizer, labels_for_error) if kind == "chat" else None
    if kind == "chat" and plain is None:
        rendered = render_chats([r["messages"] for r in rows], tokenizer, row_labels=labels_for_error,
                                tools=[r.get("tools") for r in rows], force_incremental=force_incremental_chat)
        chat_method = rendered.method
        system_merged = rendered.system_merged
        ids = rendered.input_ids
        if train_on_inputs:
            labels = [list(row) for row in ids]
        else:
            labels = [
                [tok if keep else IGNORE_INDEX for tok, keep in zip(row, mask, strict=True)]
                for row, mask in zip(ids, rendered.assistant_masks, strict=True)
            ]
    else:
        head, _ = special_affixes(tokenizer)
        # Alpaca rows on a model without a chat template train as their Stanford prompt + answer.
        prompts, completions = prompt_completion_texts(plain or rows, "prompt_completion" if plain else kind)
        with _gc_paused():
            prompt_ids = encode_texts(tokenizer, prompts)
            ids = [head + p + c + tail for p, c in zip(prompt_ids, encode_texts(tokenizer, completions),
                                                        strict=True)]
            # The answer is a suffix of each row, so lengths alone tell what is trained.
            starts = [0] * len(ids) if train_on_inputs else [len(head) + len(p) for p in prompt_ids]
            return _truncate_suffix(kind, ids, starts, max_length, len(head), truncation)
    specials = set(getattr(tokenizer, "all_special_ids", None) or []) if cut_prompt else None
    tokenized = _truncate(kind, ids, labels, max_length, chat_method, specials, truncation)
    tokenized.report.system_merged = system_merged
    return tokenized


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many token lists.

    Every few hundred new lists trigger a collection that walks all live objects (the rows
    included), which cost about as much as the encoding itself on 20k rows; lists of ints
    hold no cycles, so nothing is left for the collector to find.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _truncate_suffix(kind: str, ids: list[list[int]], starts: Sequence[int], max_length: int,
                     head: int, truncation: str) -> TokenizedRows:
    """`_truncate` for rows whose trained tokens are `row[start:]`: counts follow from lengths.

    Same report and labels as building a label list per row and counting IGNORE_INDEX in it,
    without those scans. `head` is the number of leading special tokens, which a prompt cut keeps.
    """
    report = TruncationReport(max_length=max_length, total=len(ids), truncation=truncation)
    cut_prompt = truncation == "truncate_prompt"
    lengths = report.lengths
    labels: list[list[int]] = []
    total_tokens = trainable = 0
    for index, (row, start) in enumerate(zip(ids, starts, strict=True)):
        length = len(row)
        lengths.append(length)
        first = start if start > 0 else 1  # nothing predicts the first token
        trained_before = length - first if length > first else 0
        if length > max_length:
            # Cut the prompt from the left, after the leading specials, never into the answer; one
            # token stays before the answer so that its first token is still predicted.
            cut = min(length - max_length, start - max(head, 1)) if cut_prompt else 0
            if cut > 0:
                del row[head : head + cut]
                report.prompt_cut += 1
                report.prompt_tokens_cut += cut
                first -= cut
            del row[max_length:]
            report.truncated += 1
            report.truncated_rows.append(index)
        kept = len(row)
        trained_after = kept - first if kept > first else 0
        _count_answer_loss(report, index, trained_before, trained_after)
        masked = first if first < kept else kept
        labels.append([IGNORE_INDEX] * masked + row[masked:])
        total_tokens += kept
        trainable += trained_after
    report.total_tokens, report.trainable_tokens = total_tokens, trainable
    return TokenizedRows(kind, ids, labels, report, None)


def _count_answer_loss(report: TruncationReport, index: int, trained_before: int, trained_after: int) -> None:
    """Record what truncation did to row `index`'s trained tokens; a row left with none is refused."""
    if trained_before == 0:
        report.no_answer += 1
    elif trained_after == 0:
        report.lost_all_answer += 1
    elif trained_after < trained_before:
        report.lost_part_of_answer += 1
    if trained_after == 0:
        report.refused_rows.append(index)


def _truncate(kind: str, ids: list[list[int]], labels: list[list[int]], max_length: int,
              chat_method: str | None, specials: set[int] | None, truncation: str) -> TokenizedRows:
    """Truncate rows at `max_length`, counting what it costs; `specials` (the tokenizer's special
    token ids) turns on the prompt cut of "truncate_prompt"."""
    report = TruncationReport(max_length=max_length, total=len(ids), truncation=truncation)
    for index, (row_ids, row_labels) in enumerate(zip(ids, labels, strict=True)):
        if row_labels:
            row_labels[0] = IGNORE_INDEX  # nothing predicts the first token
        length = len(row_ids)
        report.lengths.append(length)
        trained_before = len(row_labels) - row_labels.count(IGNORE_INDEX)
        if length > max_length:
            cut = _cut_before_lost_answer(row_ids, row_labels, max_length, specials) if specials is not None else 0
            if cut:
                report.prompt_cut += 1
                report.prompt_tokens_cut += cut
            del row_ids[max_length:]
            del row_labels[max_length:]
            report.truncated += 1
            report.truncated_rows.append(index)
        trained_after = len(row_labels) - row_labels.count(IGNORE_INDEX)
        _count_answer_loss(report, index, trained_before, trained_after)
        report.total_tokens += len(row_ids)
        report.trainable_tokens += trained_after
    return TokenizedRows(kind, ids, labels, report, chat_method)


def _cut_before_lost_answer(row_ids: list[int], row_labels: list[int], max_length: int,
                            specials: set[int]) -> int:
    """Cut tokens from the left so the answer that right truncation would lose fits; returns how many.

    The cut starts after the leading special tokens (BOS and the like, which the model always
    sees first) and stops at the start of the answer (the run of trained tokens) holding the
    first trained token beyond `max_length`: earlier turns go, that answer stays whole as far
    as it fits. Nothing is cut when no trained token lies beyond `max_length`.
    """
    lost = next((i for i in range(max_length, len(row_labels)) if row_labels[i] != IGNORE_INDEX), None)
    if lost is None:
        return 0
    answer_start = lost
    while answer_start > 0 and row_labels[answer_start - 1] != IGNORE_INDEX:
        answer_start -= 1
    head = 0
    while head < answer_start and row_ids[head] in specials:
        head += 1
    # One token stays before the answer, so that its first token is still predicted.
    cut = min(len(row_ids) - max_length, answer_start - max(head, 1))
    if cut <= 0:
        return 0
    del row_ids[head : head + cut]
    del row_labels[head : head + cut]
    return cut


def tokenize_rows(
    rows: Sequence[Mapping[str, Any]],
    kind: str,
    tokenizer: Any,
    *,
    max_length: int,
    train_on_inputs: bool = False,
    row_numbers: Sequence[int] | None = None,
    source: str | None = None,
    truncation: str = "refuse",
) -> TokenizedRows:
    """Tokenize rows of one kind as training does; refuse or drop rows left with no trained token.

    `row_numbers` (1-based lines in `source`) make errors point into the file.
    `truncation` is the config key of that name (`TRUNCATION_MODES`, see the module doc).
    Raises DataError naming every refused row (up to 20, then a count), unless `truncation`
    is "drop": those rows are then left out and listed in the report.
    """
    tokenized = encode_rows(rows, kind, tokenizer, max_length=max_length, train_on_inputs=train_on_inputs,
                            row_numbers=row_numbers, source=source, truncation=truncation)
    refused = tokenized.report.refused_rows
    if refused and truncation == "drop":
        return _drop_rows(tokenized, row_numbers, source)
    if refused:
        raise DataError(_refusal_issues(tokenized, kind, row_numbers, source),
                        title=f"{len(refused)} example(s) would train on no token")
    return tokenized


def _drop_rows(tokenized: TokenizedRows, row_numbers: Sequence[int] | None, source: str | None) -> TokenizedRows:
    """Leave out the refused rows; the report keeps per-row figures of every input row and names the dropped."""
    report = tokenized.report
    dropped = set(report.refused_rows)
    report.dropped_rows = list(report.refused_rows)
    report.dropped_row_names = [row_label(i, row_numbers, source) for i in report.refused_rows[:100]]
    ids = [row for i, row in enumerate(tokenized.input_ids) if i not in dropped]
    labels = [row for i, row in enumerate(tokenized.labels) if i not in dropped]
    # Dropped rows train on nothing, so only the kept-token total changes.
    report.total_tokens = sum(len(row) for row in ids)
    return TokenizedRows(tokenized.kind, ids, labels, report, tokenized.chat_mask_method)


def _refusal_issues(tokenized: TokenizedRows, kind: str, row_numbers: Sequence[int] | None,
                    source: str | None) -> list[Issue]:
    field_name = {"text": "text", "chat": "messages", "extraction": "output"}.get(kind, "completion")
    report = tokenized.report
    issues = []
    for index in report.refused_rows[:_MAX_LISTED_ROWS]:
        length = report.lengths[index]
        if length > report.max_length:
            message = (f"{row_label(index, row_numbers, source)}: the answer lies beyond max_length "
                       f"{report.max_length} (example has {length} tokens), "
                       "so truncation leaves nothing to train on")
            expected = (f"an answer starting within the first {report.max_length} tokens "
                        "(raise max_length or shorten the input)")
        else:
            message = f"{row_label(index, row_numbers, source)}: no token of this example is trained"
            expected = "a non-empty answer"
        issues.append(Issue(message, field=field_name, expected=expected, found=f"{length} tokens"))
    extra = len(report.refused_rows) - _MAX_LISTED_ROWS
    if extra > 0:
        issues.append(Issue(f"and {extra} more row(s) like these"))
    return issues


@dataclass
class EncodedClassification:
    """Classification rows as model inputs: ids, attention masks and integer labels."""

    input_ids: Sequence[list[int]]
    attention_mask: Sequence[list[int]]
    labels: list[int]
    label2id: dict[str, int]
    report: TruncationReport

    @property
    def id2label(self) -> dict[int, str]:
        """Inverse of `label2id` (what a model config stores)."""
        return {index: label for label, index in self.label2id.items()}

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_classification(
    rows: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    max_length: int,
    label2id: Mapping[str, int] | None = None,
    row_numbers: Sequence[int] | None = None,
    source: str | None = None,
) -> EncodedClassification:
    """Tokenize `{"text", "label"}` rows; labels become ints (sorted label names when not given).

    A label missing from a given `label2id` is a DataError naming the rows.
    """
    labels_text = [str(r["label"]) for r in rows]
    mapping = dict(label2id) if label2id is not None else {
        name: index for index, name in enumerate(sorted(set(labels_text)))
    }
    unknown = [i for i, name in enumerate(labels_text) if name not in mapping]
    if unknown:
        issues = [Issue(f"{row_label(i, row_numbers, source)}: unknown label", field="label",
                        expected=f"one of {sorted(mapping)}", found=repr(labels_text[i]))
                  for i in unknown[:_MAX_LISTED_ROWS]]
        raise DataError(issues, title=f"{len(unknown)} row(s) have a label outside label2id")
    texts = [str(r["text"]) for r in rows]
    encoded = tokenizer(texts, add_special_tokens=True)["input_ids"] if texts else []
    report = TruncationReport(max_length=max_length, total=len(texts))
    _, tail = special_affixes(tokenizer)
    ids = []
    for index, row in enumerate(encoded):
        row = list(row)
        report.lengths.append(len(row))
        if len(row) > max_length:
            report.truncated += 1
            report.truncated_rows.append(index)
            # Keep the special token that closes the sequence (e.g. [SEP]) when the tokenizer adds one.
            row = row[: max_length - len(tail)] + tail if tail else row[:max_length]
        report.total_tokens += len(row)
        ids.append(row)
    return EncodedClassification(ids, [[1] * len(row) for row in ids],
                                 [mapping[name] for name in labels_text], mapping, report)
