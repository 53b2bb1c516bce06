"""A long-lived generation process: models stay loaded between requests, within a byte budget.

A worker starts `python -m tunedeck.engine.generation_server --cache-bytes N` once and
talks to it over stdin and stdout, one JSON line per request and one per answer:

- request: `{"key": K, "spec": S}`. `K` names the model exactly (the worker derives it
  from the stored model's content, its base and whether the base is compared); `S` is a
  `tunedeck.engine.generation.generation` spec. Its model keys (`model_dir`, `run_root`, `label`,
  `base`) may be left out while the worker does not know whether `K` is loaded.
- while generating a spec with `"stream": true`: `{"partial": TEXT}` lines, the answer so
  far each time it grew (always a prefix of the final text), before the one answer.
- answers: `{"result": R}` (the generation result, plus `model_cached`, `load_s` and
  `model_bytes`); `{"miss": true}` when `K` is not loaded and `S` has no model to load
  (the worker then fetches it and asks again); `{"error", "kind", "issues"}` when the
  request was refused on its input (as `json_process` answers); `{"crashed": MESSAGE}`
  before the process exits 1 on anything else, so that the next request starts afresh
  rather than trusting a process in an unknown state.

Loaded models are kept least recently used first out (`core.byte_budget_cache`), sized by
their weights' bytes; one larger than the whole budget answers and is dropped. The
process ends when stdin closes (the worker stopped); the worker also starts it so that
it dies with the worker. Anything a library prints goes to stderr, so stdout carries
answers only.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from tunedeck.core.byte_budget_cache import ByteBudgetCache
from tunedeck.core.errors import TunedeckError
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.parent_death import die_with_parent
from tunedeck.engine.generation.generation import Generator, load_from_spec, run_from_spec
from tunedeck.engine.json_process import refusal

MODEL_KEYS = ("model_dir", "run_dir", "base_model")
Partial = Callable[[str], None]


class GenerationService:
    """Answers generation requests from models kept loaded by key."""

    def __init__(self, cache_bytes: int) -> None:
        self.cache: ByteBudgetCache[Generator] = ByteBudgetCache(cache_bytes)
        self.loads = 0

    def handle(self, request: Mapping[str, Any], on_partial: Partial | None = None) -> dict[str, Any]:
        """One request's answer (see the module's docstring); TunedeckError when refused on its input.

        `on_partial` hears the answer so far while a `stream` spec generates.
        """
        key = request.get("key")
        spec = request.get("spec")
        if not isinstance(key, str) or not key or not isinstance(spec, dict):
            raise TunedeckError("a generation request needs a model key (text) and a spec (an object)")
        generator = self.cache.get(key)
        cached = generator is not None
        load_s = 0.0
        if generator is None:
            if not any(spec.get(name) for name in MODEL_KEYS):
                return {"miss": True}
            started = time.monotonic()
            generator = load_from_spec(spec)
            load_s = time.monotonic() - started
            self.loads += 1
            if self.cache.put(key, generator, generator.memory_bytes()).evicted:
                _release_memory()
        streaming = {"on_text": on_partial} if spec.get("stream") and on_partial is not None else {}
        result = run_from_spec(generator, spec, **streaming)
        result.update(model_cached=cached, load_s=round(load_s, 3), model_bytes=generator.memory_bytes())
        return {"result": result}


def _release_memory() -> None:
    """Give evicted models' memory back now, not at some later collection (and the accelerator's cache too)."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def preload_libraries() -> None:
    """Import torch and transformers before the first request, while the worker downloads its model.

    They would otherwise be imported by the first load and counted in its `load_s`.
    """
    import torch  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401


def answer_channel() -> TextIO:
    """A private copy of stdout for answers; file descriptor 1 (what libraries print to) now goes to stderr."""
    sys.stdout.flush()
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answers


def serve(service: GenerationService, requests: TextIO, answers: TextIO) -> int:
    """Answer each request line until `requests` ends; the exit status."""
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise TunedeckError("a generation request must be a JSON object")
            answer = service.handle(request, lambda text: _write(answers, {"partial": text}))
        except (TunedeckError, OSError, json.JSONDecodeError) as error:
            print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
            answer = refusal(error)
        except Exception as error:
            traceback.print_exc(file=sys.stderr)
            answers.write(json.dumps({"crashed": f"{type(error).__name__}: {error}"}) + "\n")
            answers.flush()
            return ExitCode.FAILED
        _write(answers, answer)
    return ExitCode.SUCCEEDED


def _write(answers: TextIO, message: Mapping[str, Any]) -> None:
    """One line on the answer channel, sent at once (the worker reads it while generation goes on)."""
    answers.write(json.dumps(message, allow_nan=False, default=str) + "\n")
    answers.flush()


def main(argv: list[str] | None = None) -> int:
    """Parse `--cache-bytes` and serve stdin until it closes."""
    parser = argparse.ArgumentParser(prog="python -m tunedeck.engine.generation_server")
    parser.add_argument("--cache-bytes", required=True, type=int, help="bytes of model weights kept loaded")
    args = parser.parse_args(argv)
    die_with_parent()  # a worker killed mid-answer leaves no loaded model behind on the accelerator
    answers = answer_channel()
    preload_libraries()
    return serve(GenerationService(max(0, args.cache_bytes)), sys.stdin, answers)


if __name__ == "__main__":
    sys.exit(main())
