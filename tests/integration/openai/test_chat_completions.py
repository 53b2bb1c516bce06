"""`/v1/chat/completions` through the official client: whole and streamed answers from a worker's generation process.

One harness and one worker serve the whole module: alice's succeeded job stores the tiny
Llama's full weights as its final model (nothing trains), and the same folder is her
registered base model. Greedy decoding (`temperature=0`) makes answers comparable.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel

from tests.fixtures.app import AppHarness, make_settings, running_worker, start_harness
from tests.fixtures.stored_jobs import store_succeeded_job
from tunedeck.service.models.model_names import fine_tuned_model_name
from tunedeck.store.work_queue import WorkQueue
from tunedeck.worker import work_handlers

pytestmark = pytest.mark.slow  # a generation process imports torch and loads the tiny model

# The tiny model answers this with dozens of tokens before it would stop on its own.
MESSAGES: list[Any] = [
    {"role": "system", "content": "Be kind."},
    {"role": "user", "content": [{"type": "text", "text": "Write"}]},
]
LONG = 32


class Served:
    """The module's harness, its running worker, and the names alice's models go by."""

    def __init__(self, harness: AppHarness, job_id: str, model_dir: Path) -> None:
        self.api = harness
        self.model_dir = model_dir
        self.fine_tuned = fine_tuned_model_name("tiny", None, job_id)

    def client(self, user: str = "alice") -> OpenAI:
        """The official client, talking to the in-process app."""
        return OpenAI(base_url="http://testserver/v1", api_key=self.api.tokens[user], http_client=self.api.client)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, _sqlite_template: Path, tiny_llama_dir: Path) -> Iterator[Served]:
    tmp_path = tmp_path_factory.mktemp("chat")
    shutil.copyfile(_sqlite_template, tmp_path / "tunedeck.db")
    for harness in start_harness(make_settings(tmp_path, f"sqlite:///{tmp_path / 'tunedeck.db'}")):
        job_id = store_succeeded_job(harness, tiny_llama_dir, checkpoints={}, final=tiny_llama_dir, name="chat")
        with running_worker(harness):
            yield Served(harness, job_id, tiny_llama_dir)


def _ask(served: Served, **options: Any) -> ChatCompletion:
    request: dict[str, Any] = {"model": served.fine_tuned, "messages": MESSAGES, "temperature": 0, **options}
    return served.client().chat.completions.create(**request)


def _prompt_tokens(model_dir: Path) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    conversation = [MESSAGES[0], {"role": "user", "content": MESSAGES[1]["content"][0]["text"]}]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])  # the template writes the special tokens


def test_a_chat_completion_answers_with_the_tokens_counted(served: Served) -> None:
    answer = _ask(served, max_tokens=LONG)
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert answer.model == served.fine_tuned
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == _prompt_tokens(served.model_dir)
    assert 1 <= answer.usage.completion_tokens <= LONG
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


def test_a_streamed_answer_comes_in_chunks_and_joins_into_the_whole_answer(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(work_handlers, "PARTIAL_REPORT_INTERVAL_S", 0.0)  # every grown text reported
    whole = _ask(served, max_tokens=LONG, seed=3)
    stream = served.client().chat.completions.create(
        model=served.fine_tuned, messages=MESSAGES, temperature=0, max_tokens=LONG, seed=3, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    texts = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert len(texts) >= 2  # several deltas, not one block at the end
    assert "".join(texts) == whole.choices[0].message.content
    finishing = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices]
    assert finishing[-1] == whole.choices[0].finish_reason and not any(finishing[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_the_answer_so_far_is_reported_while_it_is_generated(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    reports: list[tuple[float, str]] = []
    original = WorkQueue.report_progress

    def recorded(self: WorkQueue, item_id: str, token: str, progress: Any) -> bool:
        if "text" in progress:
            reports.append((time.monotonic(), str(progress["text"])))
        return original(self, item_id, token, progress)

    monkeypatch.setattr(WorkQueue, "report_progress", recorded)
    monkeypatch.setattr(work_handlers, "PARTIAL_REPORT_INTERVAL_S", 0.0)
    stream = served.client().chat.completions.create(
        model=served.fine_tuned, messages=MESSAGES, temperature=0, max_tokens=LONG, stream=True
    )
    chunks = list(stream)
    answered = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    texts = [text for _, text in reports]
    assert len(set(texts)) >= 3  # the text grew several times before the answer was in
    assert all(answered.startswith(text) for text in texts)  # every report a prefix of the answer
    assert [len(text) for text in texts] == sorted(len(text) for text in texts)


def test_max_tokens_ends_the_answer_with_length(served: Served) -> None:
    answer = _ask(served, max_completion_tokens=3, max_tokens=LONG)  # max_completion_tokens wins
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 3


def test_a_stop_string_ends_the_answer_before_it(served: Served) -> None:
    full = str(_ask(served, max_tokens=LONG).choices[0].message.content)
    stop = full.strip().split()[min(2, len(full.split()) - 1)]
    stopped = _ask(served, max_tokens=LONG, stop=[stop, "never-written"])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == full[: full.index(stop)].strip()


def test_a_base_model_answers_alone(served: Served) -> None:
    answer = served.client().chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, max_tokens=LONG)
    # The job's final model is the base's weights: the same answer from the base model alone.
    assert answer.choices[0].message.content == _ask(served, max_tokens=LONG).choices[0].message.content


def test_refused_requests_name_their_field(served: Served) -> None:
    client = served.client()
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(model=served.fine_tuned, messages=MESSAGES, n=2)
    assert many.value.param == "n"
    with pytest.raises(openai.BadRequestError) as image:
        client.chat.completions.create(
            model=served.fine_tuned,
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
        )
    assert image.value.param == "messages[0].content"
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(
            model=served.fine_tuned, messages=MESSAGES, max_tokens=2,
            tools=[{"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}],
        )  # fmt: skip
    assert tools.value.param == "tools" and "does not use tools" in tools.value.message


def test_unknown_and_other_users_models_are_not_found(served: Served) -> None:
    with pytest.raises(openai.NotFoundError) as unknown:
        served.client().chat.completions.create(model="no-such-model", messages=MESSAGES)
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        served.client("bob").chat.completions.create(model=served.fine_tuned, messages=MESSAGES)


def _fields_match(body: dict[str, Any], model: type[BaseModel]) -> None:
    """`body` parses as `model`, has each required field and no field the model lacks (nested objects too)."""
    parsed = model.model_validate(body)
    assert not set(body) - set(model.model_fields), f"extra fields in {model.__name__}: {set(body)}"
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required <= set(body), f"{model.__name__} misses {required - set(body)}"
    for name, value in body.items():
        nested = getattr(parsed, name)
        if isinstance(value, dict) and isinstance(nested, BaseModel):
            _fields_match(value, type(nested))
        if isinstance(value, list):
            for raw, item in zip(value, nested, strict=True):
                if isinstance(raw, dict) and isinstance(item, BaseModel):
                    _fields_match(raw, type(item))


def test_bodies_and_chunks_have_exactly_the_client_types_fields(served: Served) -> None:
    api = served.api
    body = {"model": served.fine_tuned, "messages": MESSAGES, "temperature": 0, "max_tokens": 4}
    whole = api.client.post("/v1/chat/completions", headers=api.auth("alice"), json=body)
    assert whole.status_code == 200, whole.text
    _fields_match(whole.json(), ChatCompletion)
    streamed = api.client.post(
        "/v1/chat/completions", headers=api.auth("alice"),
        json={**body, "stream": True, "stream_options": {"include_usage": True}},
    )  # fmt: skip
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = [block for block in streamed.text.split("\n\n") if block]
    assert all(event.startswith("data: ") for event in events) and events[-1] == "data: [DONE]"
    for event in events[:-1]:
        _fields_match(json.loads(event.removeprefix("data: ")), ChatCompletionChunk)


def test_without_a_worker_the_request_is_cancelled_after_the_wait(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path
) -> None:
    for api in start_harness(make_settings(tmp_path, sqlite_url)):
        api.settings.chat_worker_wait_s = 0.3
        job_id = store_succeeded_job(api, tiny_llama_dir, checkpoints={}, final=tiny_llama_dir)
        client = OpenAI(base_url="http://testserver/v1", api_key=api.tokens["alice"], http_client=api.client)
        with pytest.raises(openai.InternalServerError) as refused:
            client.with_options(max_retries=0).chat.completions.create(
                model=fine_tuned_model_name("tiny", None, job_id), messages=MESSAGES
            )
        assert refused.value.status_code == 503 and "no worker answered" in refused.value.message
        items = api.store.work.list_items(api.users["alice"], kinds=["generate"])
        assert [item.state for item in items] == ["cancelled"]  # it will not run later for nobody
