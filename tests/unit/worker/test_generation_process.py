"""The worker's client of its generation process, against a stand-in process speaking the same lines (no models).

The stand-in prints a stray line first (as a library might), answers `miss` for a model
it was not given, remembers the keys it loaded, sends the prompt's first letters as partial
answers when asked to stream, and dies, hangs or refuses when the prompt says so.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunedeck.worker.engine_process import EngineProcessError, EngineRefusedError
from tunedeck.worker.generation_process import GenerationLaunch, GenerationProcess
from tunedeck.worker.work_runner import _failure

STAND_IN = textwrap.dedent(
    """
    import json, os, sys, time
    print("loading libraries...", flush=True)
    budget = int(sys.argv[sys.argv.index("--cache-bytes") + 1])
    loaded = set()
    for line in sys.stdin:
        request = json.loads(line)
        key, spec = request["key"], request["spec"]
        prompt = spec.get("prompt")
        if prompt == "die":
            print("out of memory in the stand-in", file=sys.stderr, flush=True)
            sys.exit(3)
        if prompt == "hang":
            time.sleep(60)
        if prompt == "refuse":
            answer = {"error": "cannot generate", "kind": "ConfigError",
                      "issues": [{"message": "empty conversation", "field": "messages"}]}
        elif key not in loaded and not spec.get("model_dir"):
            answer = {"miss": True}
        else:
            cached = key in loaded
            loaded.add(key)
            for length in range(1, len(prompt) + 1) if spec.get("stream") else ():
                print(json.dumps({"partial": prompt[:length]}), flush=True)
            answer = {"result": {"text": prompt, "model_cached": cached, "pid": os.getpid(), "budget": budget}}
        print(json.dumps(answer), flush=True)
    """
)


@pytest.fixture
def process(tmp_path: Path) -> Iterator[GenerationProcess]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    client = GenerationProcess([sys.executable, str(script)])
    yield client
    client.close()


@pytest.fixture
def launch(tmp_path: Path) -> GenerationLaunch:
    return GenerationLaunch(env={}, log_path=tmp_path / "generation.log", cache_bytes=1234)


class Fetches:
    """A fetch callback that counts its calls and names a model folder."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> dict[str, str]:
        self.count += 1
        return {"model_dir": "/models/m"}


def test_a_model_is_fetched_once_then_answered_from_the_process(
    process: GenerationProcess, launch: GenerationLaunch
) -> None:
    fetch = Fetches()
    first = process.generate("k1", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)
    second = process.generate("k1", {"prompt": "again"}, fetch=fetch, launch=launch, timeout_s=30)
    assert first["model_cached"] is False and second["model_cached"] is True and fetch.count == 1
    assert first["pid"] == second["pid"] == process.pid and first["budget"] == 1234
    other = process.generate("k2", {"prompt": "x"}, fetch=fetch, launch=launch, timeout_s=30)
    assert other["model_cached"] is False and fetch.count == 2  # asked first, told miss, then fetched


def test_a_process_that_dies_fails_the_request_and_the_next_starts_afresh(
    process: GenerationProcess, launch: GenerationLaunch
) -> None:
    fetch = Fetches()
    pid = process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)["pid"]
    with pytest.raises(EngineProcessError) as raised:
        process.generate("k", {"prompt": "die"}, fetch=fetch, launch=launch, timeout_s=30)
    message = str(raised.value)
    assert "generation process ended before it answered (exit 3)" in message
    assert "out of memory in the stand-in" in message  # the process's own last words
    assert _failure("generate", raised.value)["status"] == 503
    assert not process.alive
    again = process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)
    assert again["pid"] != pid and again["model_cached"] is False and fetch.count == 2


def test_a_request_past_its_time_stops_the_process(process: GenerationProcess, launch: GenerationLaunch) -> None:
    fetch = Fetches()
    process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)
    pid = process.pid
    assert pid is not None
    with pytest.raises(EngineProcessError, match="took longer than 1 s and was stopped"):
        process.generate("k", {"prompt": "hang"}, fetch=fetch, launch=launch, timeout_s=1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)["text"] == "hi"


def test_a_refusal_keeps_the_process(process: GenerationProcess, launch: GenerationLaunch) -> None:
    fetch = Fetches()
    pid = process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)["pid"]
    with pytest.raises(EngineRefusedError) as raised:
        process.generate("k", {"prompt": "refuse"}, fetch=fetch, launch=launch, timeout_s=30)
    assert raised.value.title == "cannot generate" and raised.value.issues[0].field == "messages"
    assert _failure("generate", raised.value)["status"] == 422
    assert process.pid == pid


def test_closing_ends_the_process_and_refuses_later_requests(
    process: GenerationProcess, launch: GenerationLaunch
) -> None:
    pid = process.generate("k", {"prompt": "hi"}, fetch=Fetches(), launch=launch, timeout_s=30)["pid"]
    process.close()
    assert not process.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(EngineProcessError, match="the worker is stopping"):
        process.generate("k", {"prompt": "hi"}, fetch=Fetches(), launch=launch, timeout_s=30)


def test_release_drops_the_kept_models_and_the_next_request_loads_afresh(
    process: GenerationProcess, launch: GenerationLaunch
) -> None:
    fetch = Fetches()
    pid = process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)["pid"]
    process.release()  # nothing in flight: the process ends at once
    assert not process.alive
    again = process.generate("k", {"prompt": "hi"}, fetch=fetch, launch=launch, timeout_s=30)
    assert again["pid"] != pid and again["model_cached"] is False and fetch.count == 2


def test_partial_answers_are_relayed_before_the_result(process: GenerationProcess, launch: GenerationLaunch) -> None:
    heard: list[str] = []
    fetch = Fetches()
    answer = process.generate(
        "k", {"prompt": "abc", "stream": True}, fetch=fetch, launch=launch, timeout_s=30, on_partial=heard.append
    )
    assert heard == ["a", "ab", "abc"] and answer["text"] == "abc"


def test_a_partial_answer_that_cannot_be_passed_on_leaves_the_process_in_step(
    process: GenerationProcess, launch: GenerationLaunch
) -> None:
    def broken(text: str) -> None:
        raise RuntimeError("the database is away")

    fetch = Fetches()
    answer = process.generate(
        "k", {"prompt": "abc", "stream": True}, fetch=fetch, launch=launch, timeout_s=30, on_partial=broken
    )
    assert answer["text"] == "abc"  # the rest of the partial lines were read, not left for the next request
    assert process.generate("k", {"prompt": "next"}, fetch=fetch, launch=launch, timeout_s=30)["text"] == "next"
