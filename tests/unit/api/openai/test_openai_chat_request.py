"""How a chat completion request becomes a `generate` item's inputs, and which fields are refused, by name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tunedeck.api.openai.chat_request import generation_inputs
from tunedeck.api.openai.schemas.chat import ChatCompletionIn
from tunedeck.api.schemas.exports import DEFAULT_NEW_TOKENS, MAX_NEW_TOKENS
from tunedeck.core.errors import IssueListError

USER = {"role": "user", "content": "hi"}


def _inputs(**fields: Any) -> dict[str, Any]:
    return generation_inputs(ChatCompletionIn.model_validate({"model": "m", "messages": [USER], **fields}))


def _refused(**fields: Any) -> list[str | None]:
    with pytest.raises(IssueListError) as refused:
        _inputs(**fields)
    return [issue.field for issue in refused.value.issues]


def test_messages_keep_their_roles_and_text_parts_are_joined() -> None:
    messages = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                "function": {"name": "clock", "arguments": "{}"}}]},
        {"role": "tool", "content": "noon", "tool_call_id": "c1"},
    ]  # fmt: skip
    inputs = _inputs(messages=messages)
    assert inputs["messages"] == [
        {"role": "system", "content": "be brief"},  # the client's newer name for the system role
        {"role": "user", "content": "one\ntwo"},
        {"role": "assistant", "content": "", "tool_calls": messages[2]["tool_calls"]},
        {"role": "tool", "content": "noon", "tool_call_id": "c1"},
    ]


def test_content_other_than_text_is_refused_naming_the_message() -> None:
    image = {"type": "image_url", "image_url": {"url": "http://x/y.png"}}
    content = [{"type": "text", "text": "look"}, image]
    assert _refused(messages=[USER, {"role": "user", "content": content}]) == ["messages[1].content"]
    assert _refused(messages=[{"role": "user", "content": None}]) == ["messages[0].content"]


def test_token_limits_take_max_completion_tokens_first_and_stop_at_the_generation_limit() -> None:
    assert _inputs()["max_new_tokens"] == DEFAULT_NEW_TOKENS
    assert _inputs(max_tokens=7)["max_new_tokens"] == 7
    assert _inputs(max_tokens=7, max_completion_tokens=9)["max_new_tokens"] == 9
    assert _refused(max_completion_tokens=MAX_NEW_TOKENS + 1) == ["max_completion_tokens"]
    assert _refused(max_tokens=MAX_NEW_TOKENS + 1) == ["max_tokens"]
    assert _inputs(max_tokens=MAX_NEW_TOKENS)["max_new_tokens"] == MAX_NEW_TOKENS


def test_stop_is_a_list_of_at_most_four_strings() -> None:
    assert _inputs(stop="END")["stop"] == ["END"]
    assert _inputs(stop=["a", "b"])["stop"] == ["a", "b"]
    assert _inputs()["stop"] == []
    assert _refused(stop=["a", "b", "c", "d", "e"]) == ["stop"]
    assert _refused(stop=[""]) == ["stop"]


def test_temperature_zero_is_greedy_and_a_seed_makes_sampling_repeatable() -> None:
    greedy = _inputs(temperature=0)
    assert greedy["do_sample"] is False
    sampled = _inputs(temperature=0.7, top_p=0.9, seed=5)
    assert (sampled["do_sample"], sampled["temperature"], sampled["top_p"], sampled["seed"]) == (True, 0.7, 0.9, 5)
    default = _inputs()
    assert default["do_sample"] is True and default["temperature"] == 1.0  # the client's API samples by default
    assert len({_inputs()["seed"] for _ in range(5)}) > 1  # no seed: a fresh draw each time


def test_fields_tunedeck_does_not_honour_are_refused_by_name() -> None:
    assert _refused(n=2) == ["n"]
    assert _refused(logprobs=True, top_logprobs=3) == ["logprobs", "top_logprobs"]
    assert _refused(frequency_penalty=0.5, presence_penalty=-1.0) == ["frequency_penalty", "presence_penalty"]
    assert _refused(logit_bias={"50256": -100}) == ["logit_bias"]
    assert _refused(response_format={"type": "json_object"}) == ["response_format"]
    assert _refused(tool_choice="required") == ["tool_choice"]
    assert _refused(stream_options={"include_usage": True}) == ["stream_options"]


def test_the_defaults_of_refused_fields_are_accepted() -> None:
    inputs = _inputs(n=1, logprobs=False, frequency_penalty=0, presence_penalty=0, logit_bias={},
                     response_format={"type": "text"}, tool_choice="auto", user="someone")  # fmt: skip
    assert inputs["messages"] == [USER]


def test_tools_are_passed_on_unless_the_choice_is_none() -> None:
    tools = [{"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}]
    assert _inputs(tools=tools)["tools"] == tools
    assert _inputs(tools=tools, tool_choice="none")["tools"] is None


def test_a_field_the_client_api_does_not_have_is_refused() -> None:
    with pytest.raises(ValidationError, match="temprature"):
        ChatCompletionIn.model_validate({"model": "m", "messages": [USER], "temprature": 0})
