"""One two-process run that several tests compare against (launched once: each launch costs half a minute)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tests.integration.engine.launching import launch
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec


@dataclass(frozen=True)
class ReferenceRun:
    """A finished 2-process DDP run (gloo): its spec and run directory."""

    spec: RunSpec
    run_dir: Path


def reference_spec(model: Path, train: Path, out: Path, processes: int, **overrides: object) -> RunSpec:
    """The reference run's spec on `processes` processes (24 rows, micro-batch 2, a checkpoint every 2 steps)."""
    values: dict[str, object] = {
        "batch_size": 2, "learning_rate": 1e-3, "lr_scheduler": "constant", "save_strategy": "steps",
        "save_steps": 2, "chunked_cross_entropy": False, "packing": False, "max_length": 64,
        **({"devices": 0, "processes": processes} if processes > 1 else {}),
    }  # fmt: skip
    values.update(overrides)
    if values["save_strategy"] == "no":
        del values["save_steps"]  # set with saving off, it is refused as a contradiction
    return RunSpec(fast_config(**values), ModelRef(str(model)), train, out)


@pytest.fixture(scope="session")
def ddp_reference(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> ReferenceRun:
    """24 chat rows on 2 processes with accumulation 1: 6 steps, checkpoints at 2, 4 and 6."""
    folder = tmp_path_factory.mktemp("ddp-reference")
    spec = reference_spec(tiny_llama_dir, write_chat(folder, 24), folder / "run", 2)
    assert launch(spec, 2, folder / "launch") == 0, (folder / "launch" / "output.log").read_text()
    return ReferenceRun(spec, folder / "run")
