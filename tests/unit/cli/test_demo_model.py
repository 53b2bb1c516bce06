"""`tunedeck demo` builds its tiny Llama in the data folder on a first start and reuses it after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunedeck.cli import demo_command
from tunedeck.demo import tiny_models


def test_the_demo_builds_its_model_when_missing_and_reuses_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[str, Path]] = []

    def fake_build(arch: str, out_dir: Path, **options: Any) -> tiny_models.TinyModelInfo:
        assert options == {}  # the defaults: the same model the test suite's tiny Llama is
        built.append((arch, out_dir))
        out_dir.mkdir(parents=True)
        (out_dir / "config.json").write_text("{}", encoding="utf-8")
        return tiny_models.TinyModelInfo(out_dir, arch, 1, 1, 60, None, None)

    monkeypatch.setattr(tiny_models, "create_tiny_model", fake_build)
    folder = tmp_path / "models" / "tiny-llama"

    assert demo_command._tiny_model(folder) == folder
    assert built == [("llama", folder)]
    assert demo_command._tiny_model(folder) == folder
    assert built == [("llama", folder)]  # a second start builds nothing
