"""The run spec's guards: read in either form, kept in compact form, a bad one named by its index."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.engine.training.run_spec import RunSpec


def _data(tmp_path: Path, guards: object) -> dict[str, object]:
    return {"model": {"name": "/models/base"}, "train": "t.jsonl", "out": str(tmp_path / "run"), "guards": guards}


def test_guards_are_read_in_either_form_and_round_trip(tmp_path: Path) -> None:
    spec = RunSpec.from_dict(
        _data(tmp_path, ["accuracy >= baseline - 0.02", {"metric": "eval_loss", "comparator": "<=", "threshold": 2}])
    )
    assert spec.guards == ["accuracy >= baseline - 0.02", "eval_loss <= 2"]
    assert RunSpec.from_dict(spec.to_dict()).guards == spec.guards
    assert RunSpec.from_dict({**_data(tmp_path, None)}).guards == []


def test_a_bad_guard_is_named_by_its_place(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"guards\[1\]"):
        RunSpec.from_dict(_data(tmp_path, ["accuracy >= baseline", "accuracy => 3"]))
    with pytest.raises(ConfigError, match="guards"):
        RunSpec.from_dict(_data(tmp_path, "accuracy >= baseline"))
