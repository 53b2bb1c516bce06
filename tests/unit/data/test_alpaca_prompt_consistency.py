"""An Alpaca-trained job is prompted (evaluation, generation) with exactly the tokens training put before its answer.

Checked on a tokenizer with a chat template (the rows train as chat) and on the same tokenizer
without one (the rows train through the Stanford template).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.data import write_jsonl
from tunedeck.core.errors import ConfigError
from tunedeck.data.loading import load_dataset
from tunedeck.data.tokenize import IGNORE_INDEX, tokenize_rows
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import build_tokenizer
from tunedeck.engine.generation.generation import prompt_ids
from tunedeck.eval.decoding import build_prompts

ROWS = [
    {"instruction": "List three primary colours.", "output": "Red, blue, yellow."},
    {"instruction": "Answer politely.", "output": "Of course.", "system": "You are courteous."},
    {"instruction": "Convert to uppercase.", "input": "hello", "output": "HELLO"},
]


@pytest.fixture(scope="module", params=["chat_template", "no_chat_template"])
def tok(request: pytest.FixtureRequest) -> Any:
    tokenizer = build_tokenizer(builtin_corpus(), "llama")
    if request.param == "no_chat_template":
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.chat_template = None
    return tokenizer


def training_prompts(tok: Any, tmp_path: Path) -> tuple[Any, list[list[int]]]:
    """The loaded rows and, per row, the tokens training puts before the first trained token."""
    loaded = load_dataset(write_jsonl(tmp_path / "alpaca.jsonl", ROWS))
    assert loaded.kind == "chat"
    out = tokenize_rows(loaded.rows, loaded.kind, tok, max_length=512)
    prefixes = []
    for ids, labels in zip(out.input_ids, out.labels, strict=True):
        first = next(i for i, label in enumerate(labels) if label != IGNORE_INDEX)
        prefixes.append(list(ids[:first]))
    return loaded, prefixes


def test_evaluation_prompt_is_the_training_prompt(tok: Any, tmp_path: Path) -> None:
    loaded, prefixes = training_prompts(tok, tmp_path)
    built = build_prompts(loaded.rows, loaded.kind, tok, max_length=512)
    assert [p.ids for p in built] == prefixes
    assert [p.reference for p in built] == [r["output"] for r in ROWS]


def test_generation_prompt_is_the_training_prompt(tok: Any, tmp_path: Path) -> None:
    _, prefixes = training_prompts(tok, tmp_path)
    # A plain prompt to a job trained on chat (Alpaca) rows is its instruction.
    ids, truncated = prompt_ids(tok, ROWS[0]["instruction"], None, "chat", 512)
    assert ids == prefixes[0] and not truncated
    messages = [{"role": "system", "content": ROWS[1]["system"]}, {"role": "user", "content": ROWS[1]["instruction"]}]
    ids, _ = prompt_ids(tok, None, messages, "chat", 512)
    assert ids == prefixes[1]


def test_generation_without_chat_template_refuses_a_conversation(tmp_path: Path) -> None:
    tokenizer = copy.deepcopy(build_tokenizer(builtin_corpus(), "llama"))
    tokenizer.chat_template = None
    conversation = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                    {"role": "user", "content": "c"}]
    with pytest.raises(ConfigError, match="cannot generate"):
        prompt_ids(tokenizer, None, conversation, "chat", 512)


def test_alpaca_history_trains_every_answer_as_the_same_chat_row_does(tmp_path: Path) -> None:
    tok = build_tokenizer(builtin_corpus(), "llama")
    alpaca = load_dataset(write_jsonl(tmp_path / "history.jsonl", [
        {"instruction": "And 3+3?", "output": "6", "system": "Be terse.", "history": [["1+1?", "2"], ["2+2?", "4"]]},
    ]))
    chat = load_dataset(write_jsonl(tmp_path / "chat.jsonl", [{"messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"},
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "6"},
    ]}]))
    from_alpaca = tokenize_rows(alpaca.rows, alpaca.kind, tok, max_length=512)
    from_chat = tokenize_rows(chat.rows, chat.kind, tok, max_length=512)
    # Token for token the same ids and labels: every answer trained, history answers included.
    assert from_alpaca.input_ids == from_chat.input_ids and from_alpaca.labels == from_chat.labels
    trained = tok.decode([label for label in from_alpaca.labels[0] if label != IGNORE_INDEX])
    assert all(answer in trained for answer in ("2", "4", "6")) and "1+1?" not in trained
