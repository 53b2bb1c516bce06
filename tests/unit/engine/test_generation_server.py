"""The generation process's request loop, with stand-in models (no torch): misses, hits, eviction, refusals."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.engine import generation_server
from tunedeck.engine.generation_server import GenerationService, serve


class StandIn:
    """A loaded model of a given size that answers with the prompt."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.name = str(spec["model_dir"])
        self.size = int(spec["size"])

    def memory_bytes(self) -> int:
        return self.size


def _run(generator: StandIn, spec: Mapping[str, Any]) -> dict[str, Any]:
    if spec.get("prompt") == "refuse":
        raise ConfigError([Issue("give exactly one of prompt or messages", field="prompt")], title="cannot generate")
    if spec.get("prompt") == "crash":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return {"model": generator.name, "text": spec.get("prompt")}


@pytest.fixture(autouse=True)
def stand_in_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation_server, "load_from_spec", StandIn)
    monkeypatch.setattr(generation_server, "run_from_spec", _run)


def _ask(service: GenerationService, key: str, prompt: str, model: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"prompt": prompt}
    if model is not None:
        spec.update(model_dir=model, size=60)
    return service.handle({"key": key, "spec": spec})


def test_a_key_not_loaded_is_a_miss_until_its_model_comes_along() -> None:
    service = GenerationService(100)
    assert _ask(service, "a", "hi") == {"miss": True} and service.loads == 0
    cold = _ask(service, "a", "hi", "/m/a")["result"]
    warm = _ask(service, "a", "again")["result"]  # no model sent: the loaded one answers
    assert cold["model_cached"] is False and cold["model_bytes"] == 60
    assert warm == {"model": "/m/a", "text": "again", "model_cached": True, "load_s": 0.0, "model_bytes": 60}
    assert service.loads == 1


def test_the_budget_holds_one_model_and_the_older_one_goes() -> None:
    service = GenerationService(100)
    _ask(service, "a", "hi", "/m/a")
    _ask(service, "b", "hi", "/m/b")
    assert service.cache.keys() == ["b"]
    assert _ask(service, "a", "hi") == {"miss": True}
    assert _ask(service, "b", "hi")["result"]["model_cached"] is True


def test_serve_answers_each_line_refusals_included_and_stops_on_a_crash() -> None:
    service = GenerationService(100)
    lines = [
        json.dumps({"key": "a", "spec": {"prompt": "hi", "model_dir": "/m/a", "size": 10}}),
        "not json",
        json.dumps({"key": "a", "spec": {"prompt": "refuse"}}),
        json.dumps({"spec": {}}),
        json.dumps({"key": "a", "spec": {"prompt": "crash"}}),
        json.dumps({"key": "a", "spec": {"prompt": "never read"}}),
    ]
    answers = io.StringIO()
    assert serve(service, io.StringIO("\n".join(lines) + "\n"), answers) == 1
    read = [json.loads(line) for line in answers.getvalue().splitlines()]
    assert read[0]["result"]["text"] == "hi"
    assert read[1]["kind"] == "JSONDecodeError"
    assert read[2]["error"] == "cannot generate" and read[2]["kind"] == "ConfigError"
    assert read[2]["issues"][0]["field"] == "prompt"  # located issues, as a one-shot engine process gives them
    assert read[3]["kind"] == "TunedeckError" and "model key" in read[3]["error"]
    assert read[4] == {"crashed": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    assert len(read) == 5  # the process ends after a crash: the next request starts a fresh one


def test_a_streamed_request_writes_its_partial_answers_before_its_result(monkeypatch: pytest.MonkeyPatch) -> None:
    def growing(generator: StandIn, spec: Mapping[str, Any], *, on_text: Any = None) -> dict[str, Any]:
        for length in (1, 2):
            on_text(spec["prompt"][:length])
        return {"text": spec["prompt"]}

    monkeypatch.setattr(generation_server, "run_from_spec", growing)
    answers = io.StringIO()
    request = {"key": "a", "spec": {"prompt": "hey", "model_dir": "/m/a", "size": 1, "stream": True}}
    assert serve(GenerationService(100), io.StringIO(json.dumps(request) + "\n"), answers) == 0
    lines = [json.loads(line) for line in answers.getvalue().splitlines()]
    assert lines[:2] == [{"partial": "h"}, {"partial": "he"}] and lines[2]["result"]["text"] == "hey"
