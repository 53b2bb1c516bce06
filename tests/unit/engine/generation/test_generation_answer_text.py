"""The answer in generated tokens: cut at stop tokens, the end-of-turn marker and stop strings; partial answers
only ever grow into the final one; tools refused by a template that ignores them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.engine.generation.generation import SamplingOptions, answer_text, refuse_unused_tools

EOS = 0


class CharTokenizer:
    """One token per character (id = code point); token 0 is the end of sequence."""

    chat_template: str | None = "{{ messages }}"

    def __init__(self, uses_tools: bool = True) -> None:
        self.uses_tools = uses_tools

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(token) for token in ids if token != EOS)

    def apply_chat_template(self, messages: Any, tools: Any = None, **options: Any) -> str:
        return f"{messages}{tools if self.uses_tools and tools else ''}"


def _ids(text: str) -> list[int]:
    return [ord(char) for char in text]


def test_the_answer_ends_at_a_stop_token_the_marker_or_the_first_stop_string() -> None:
    tokenizer = CharTokenizer()
    assert answer_text(tokenizer, [*_ids(" hello "), EOS, *_ids("x")], [EOS], None, ()).text == "hello"
    marked = answer_text(tokenizer, _ids("hi<|end|>more"), [EOS], "<|end|>", ())
    assert (marked.text, marked.stopped) == ("hi", True)
    stopped = answer_text(tokenizer, _ids("one. two. END three"), [EOS], None, ("END", "two"))
    assert (stopped.text, stopped.stopped) == ("one.", True)
    capped = answer_text(tokenizer, _ids("no end"), [EOS], "<|end|>", ("STOP",))
    assert (capped.text, capped.stopped, len(capped.kept)) == ("no end", False, 6)


def test_partial_answers_hold_back_what_may_become_a_stop_and_grow_into_the_final_answer() -> None:
    tokenizer = CharTokenizer()
    row = _ids("We go <|e") + _ids("nd|> after")
    partials = [
        answer_text(tokenizer, row[:length], [EOS], "<|end|>", ("STOP",), final=False).text
        for length in range(len(row) + 1)
    ]
    final = answer_text(tokenizer, row, [EOS], "<|end|>", ("STOP",)).text
    assert final == "We go"
    assert all(final.startswith(partial) for partial in partials)  # never a character of the marker
    assert partials[5] == "" and partials[-1] == "We go"
    assert answer_text(tokenizer, _ids("ab\ufffd"), [EOS], None, (), final=False).text == "ab"  # bytes still coming


def test_a_template_that_ignores_tools_refuses_them() -> None:
    tools = [{"type": "function", "function": {"name": "clock"}}]
    conversation = [{"role": "user", "content": "time?"}]
    refuse_unused_tools(CharTokenizer(uses_tools=True), conversation, tools)  # rendered: accepted
    with pytest.raises(ConfigError, match="does not use tools") as refused:
        refuse_unused_tools(CharTokenizer(uses_tools=False), conversation, tools)
    assert refused.value.issues[0].field == "tools"
    without = CharTokenizer()
    without.chat_template = None
    with pytest.raises(ConfigError, match="does not use tools"):
        refuse_unused_tools(without, conversation, tools)


def test_stop_strings_are_checked_with_the_other_options() -> None:
    SamplingOptions(stop=("a", "b", "c", "d")).check()
    for stop in (("a", "b", "c", "d", "e"), ("",)):
        with pytest.raises(ConfigError) as refused:
            SamplingOptions(stop=stop).check()
        assert refused.value.issues[0].field == "stop"
