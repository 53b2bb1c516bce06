"""Every format's fixture file, loaded and tokenized as training does, trains on exactly its answers.

The fixtures are the shared ones in tests/fixtures/data.py. For each file the tokens are split
into runs of trained and masked tokens; the trained runs must decode to the completion or
assistant answers (each with its closing token), and trained plus masked runs must decode back
to the whole rendered example, so every other token is masked.
"""

from __future__ import annotations

import copy
import json
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.data import ROWS_BY_FORMAT, write_jsonl
from tunedeck.core.errors import DataError
from tunedeck.data.formats.instruction import ALPACA_PREAMBLE, ALPACA_PREAMBLE_WITH_INPUT
from tunedeck.data.loading import load_dataset
from tunedeck.data.tokenize import IGNORE_INDEX, TokenizedRows, canonical_json, tokenize_rows
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import build_tokenizer

MAX_LENGTH = 512
END = "<|end|>"  # what closes an assistant turn in the tiny chat template

TOOL_CALL = "<|tool_call|>"


@pytest.fixture(scope="module")
def tok() -> Any:
    """A Llama-like tiny tokenizer: prepends <s>, ends answers with </s>, has a marked chat template."""
    return build_tokenizer(builtin_corpus(), "llama")


def runs(tok: Any, tokenized: TokenizedRows, row: int) -> tuple[list[str], str]:
    """(decoded trained runs in order, the whole example decoded run by run)."""
    pairs = zip(tokenized.input_ids[row], tokenized.labels[row], strict=True)
    trained, whole = [], ""
    for is_trained, group in groupby(pairs, key=lambda pair: pair[1] != IGNORE_INDEX):
        ids = [token for token, _ in group]
        text = tok.decode(ids)
        whole += text
        if is_trained:
            trained.append(text)
    return trained, whole


def decoded_function(function: dict[str, Any]) -> dict[str, Any]:
    """A tool call's function with JSON-text arguments decoded: what the template serialises."""
    arguments = function.get("arguments")
    return {**function, "arguments": json.loads(arguments)} if isinstance(arguments, str) else function


def assistant_answers(messages: list[dict[str, Any]]) -> list[str]:
    """What the tiny template trains in a conversation: each assistant content, its tool calls, its closing token."""
    return [
        (m.get("content") or "")
        + "".join(TOOL_CALL + json.dumps(decoded_function(call["function"])) for call in m.get("tool_calls") or [])
        + END
        for m in messages
        if m["role"] == "assistant"
    ]


def expected_answers(source_format: str, raw: dict[str, Any], eos: str) -> list[str]:
    """The trained text of one raw fixture row, built from the row itself (not from our code)."""
    if source_format == "text":
        return []  # checked separately: every token but the first
    if source_format == "prompt_completion":
        return [raw["completion"] + eos]
    if source_format == "alpaca":
        return [raw["output"] + END]  # through the chat template, as a chat row
    if source_format == "extraction":
        return [canonical_json(raw["output"]) + eos]
    if source_format == "chat":
        return assistant_answers(raw["messages"])
    if source_format == "sharegpt":
        return [turn["value"] + END for turn in raw["conversations"] if turn["from"] == "gpt"]
    raise AssertionError(source_format)


LM_FORMATS = ["text", "prompt_completion", "chat", "alpaca", "sharegpt", "extraction"]


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "override"])
@pytest.mark.parametrize("source_format", LM_FORMATS)
def test_fixture_trains_on_exactly_its_answers(
    source_format: str, explicit: bool, tok: Any, data_dir: Path
) -> None:
    path = data_dir / f"{source_format}.jsonl"
    loaded = load_dataset(path, source_format if explicit else "auto")
    assert loaded.source_format == source_format
    out = tokenize_rows(loaded.rows, loaded.kind, tok, max_length=MAX_LENGTH, row_numbers=loaded.line_numbers)
    assert out.report.truncated == 0 and not out.report.refused_rows
    for index, raw in enumerate(ROWS_BY_FORMAT[source_format]):
        trained, whole = runs(tok, out, index)
        ids, labels = out.input_ids[index], out.labels[index]
        assert ids[0] == tok.bos_token_id and labels[0] == IGNORE_INDEX
        if source_format == "text":
            assert labels[1:] == ids[1:]
            assert whole == tok.bos_token + raw["text"] + tok.eos_token
            continue
        assert trained == expected_answers(source_format, raw, tok.eos_token), f"row {index}"
        if loaded.kind == "chat":
            # Masked runs are the rest: the whole render is the tokenizer's own chat template.
            assert whole == tok.apply_chat_template(loaded.rows[index]["messages"], tokenize=False)
        else:
            assert whole == tok.bos_token + loaded.rows[index]["prompt" if "prompt" in loaded.rows[index]
                                                                else "input"] + trained[0]


@pytest.fixture(scope="module")
def plain_tok(tok: Any) -> Any:
    """The same tokenizer without a chat template (a base model)."""
    bare = copy.deepcopy(tok)
    bare.chat_template = None
    return bare


def test_alpaca_without_chat_template_uses_the_stanford_template_and_masks_it(plain_tok: Any,
                                                                              alpaca_file: Path) -> None:
    tok = plain_tok
    loaded = load_dataset(alpaca_file)
    out = tokenize_rows(loaded.rows, loaded.kind, tok, max_length=MAX_LENGTH)
    for index, raw in enumerate(ROWS_BY_FORMAT["alpaca"]):
        trained, whole = runs(tok, out, index)
        system = raw.get("system") or (ALPACA_PREAMBLE_WITH_INPUT if raw.get("input") else ALPACA_PREAMBLE)
        assert whole.startswith(tok.bos_token + system + "\n\n### Instruction:\n" + raw["instruction"])
        assert ("### Input:\n" in whole) == bool(raw.get("input"))
        assert not raw.get("input") or "### Input:\n" + raw["input"] + "\n\n" in whole
        assert whole.endswith("### Response:\n" + raw["output"] + tok.eos_token)
        assert trained == [raw["output"] + tok.eos_token]
        # Token-exact: the plain prompt encoded alone, then the answer and eos, trained from the answer on.
        prompt_ids = tok(loaded.rows[index]["plain_prompt"], add_special_tokens=False)["input_ids"]
        answer_ids = tok(raw["output"], add_special_tokens=False)["input_ids"]
        head = [tok.bos_token_id]
        assert out.input_ids[index] == head + prompt_ids + answer_ids + [tok.eos_token_id]
        assert out.labels[index] == [IGNORE_INDEX] * (1 + len(prompt_ids)) + answer_ids + [tok.eos_token_id]


def test_alpaca_with_chat_template_is_token_exact_the_equivalent_chat_row(tok: Any, data_dir: Path) -> None:
    raw = ROWS_BY_FORMAT["alpaca"]
    alpaca = load_dataset(data_dir / "alpaca.jsonl")
    equivalent = [
        [*([{"role": "system", "content": r["system"]}] if r.get("system") else []),
         {"role": "user", "content": "\n".join(p for p in (r["instruction"], r.get("input") or "") if p)},
         {"role": "assistant", "content": r["output"]}]
        for r in raw
    ]
    chat = load_dataset(write_jsonl(data_dir / "alpaca-as-chat.jsonl", [{"messages": m} for m in equivalent]))
    from_alpaca = tokenize_rows(alpaca.rows, alpaca.kind, tok, max_length=MAX_LENGTH)
    from_chat = tokenize_rows(chat.rows, chat.kind, tok, max_length=MAX_LENGTH)
    assert [list(r) for r in from_alpaca.input_ids] == [list(r) for r in from_chat.input_ids]
    assert [list(r) for r in from_alpaca.labels] == [list(r) for r in from_chat.labels]
    for index, r in enumerate(raw):
        assert runs(tok, from_alpaca, index)[0] == [r["output"] + END]


def test_alpaca_with_history_and_no_chat_template_is_refused_by_row(plain_tok: Any, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"instruction": "i", "output": "o"},
                                              {"instruction": "i", "output": "o", "history": [["a", "b"]]}])
    loaded = load_dataset(path)
    with pytest.raises(DataError) as caught:
        tokenize_rows(loaded.rows, loaded.kind, plain_tok, max_length=MAX_LENGTH, row_numbers=loaded.line_numbers,
                      source="a.jsonl")
    assert "1 row(s)" in str(caught.value) and "a.jsonl:2" in str(caught.value)


def test_multi_turn_chat_trains_every_assistant_turn_and_no_other(tok: Any, chat_file: Path) -> None:
    loaded = load_dataset(chat_file)
    out = tokenize_rows(loaded.rows, loaded.kind, tok, max_length=MAX_LENGTH)
    trained, whole = runs(tok, out, 0)
    assert trained == ["Eight." + END, "Six." + END]
    for masked in ("You are a terse assistant.", "How many legs does a spider have?", "And an insect?"):
        assert masked in whole and all(masked not in text for text in trained)


def test_assistant_tool_calls_are_kept_and_trained(tok: Any, chat_file: Path) -> None:
    # The tool call is kept in the canonical row and, rendered by the template, trained as part of
    # the assistant turn, while the tool's reply stays masked. Its JSON-text arguments are decoded
    # first, so the model learns the object, not an escaped string.
    loaded = load_dataset(chat_file)
    out = tokenize_rows(loaded.rows, loaded.kind, tok, max_length=MAX_LENGTH)
    trained, whole = runs(tok, out, 1)
    call = ROWS_BY_FORMAT["chat"][1]["messages"][1]["tool_calls"][0]["function"]
    assert trained == [f'{TOOL_CALL}{{"name": "{call["name"]}", "arguments": {{"city": "Lyon"}}}}{END}',
                       "It is 18 °C and clear in Lyon." + END]
    tool_reply = ROWS_BY_FORMAT["chat"][1]["messages"][2]["content"]
    assert tool_reply in whole and all(tool_reply not in text for text in trained)
    assert json.loads(call["arguments"]) == {"city": "Lyon"}


@pytest.mark.parametrize(("source_format", "override"), [
    ("prompt_completion", "chat"), ("chat", "prompt_completion"), ("alpaca", "extraction"),
    ("sharegpt", "chat"), ("extraction", "alpaca"), ("text", "classification"),
])
def test_override_that_does_not_fit_registers_nothing(source_format: str, override: str, data_dir: Path,
                                                      tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS_BY_FORMAT[source_format])
    with pytest.raises(DataError) as caught:
        load_dataset(path, override)
    assert caught.value.issues and all(issue.line is not None for issue in caught.value.issues)
