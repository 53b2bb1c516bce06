"""A second run over the same data and tokenizer reuses the tokenized cache: tokenization does not run again."""

from __future__ import annotations

from pathlib import Path

import pytest

import tunedeck.data.cache as cache_module
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

from .engine_data import fast_config, metric_events, read_json, write_chat


def test_second_run_reuses_the_tokenization(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = cache_module.tokenize_rows

    def counting(rows, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(rows))
        return real(rows, *args, **kwargs)

    monkeypatch.setattr(cache_module, "tokenize_rows", counting)
    train = write_chat(tmp_path, 12)
    config = fast_config(epochs=1, save_strategy="no")
    cache = tmp_path / "cache"

    run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "first", cache_dir=cache))
    assert calls == [12]
    run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "second", cache_dir=cache))
    assert calls == [12]  # not tokenized again
    first, second = (
        read_json(tmp_path / name / "data_manifest.json")["tokenization"]["train"] for name in ("first", "second")
    )
    assert first["cache_hit"] is False and second["cache_hit"] is True
    losses = [[e["loss"] for e in metric_events(tmp_path / name)] for name in ("first", "second")]
    assert losses[0] == losses[1]  # the cached rows train exactly like fresh ones

    # Another max_length is another cache entry.
    run_training(
        RunSpec(
            fast_config(epochs=1, save_strategy="no", max_length=48),
            ModelRef(str(tiny_llama_dir)),
            train,
            tmp_path / "third",
            cache_dir=cache,
        )
    )
    assert calls == [12, 12]
