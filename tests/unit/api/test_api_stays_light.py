"""The API process never loads model or data-processing code: importing and building the app brings in no
torch, engine, worker, or the data layer's readers, scanners and deduplication (uploads are ingested on workers).

The one data module it reads is the rule of which row kinds train which task: a table, no parsing."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "torch", "transformers", "peft", "trl", "accelerate", "tunedeck.engine", "tunedeck.worker",
    "tunedeck.data", "datasketch", "detect_secrets", "pyarrow", "numpy",
)  # fmt: skip
LIGHT_DATA = ("tunedeck.data", "tunedeck.data.task_kinds")
SCRIPT = """
import json, pathlib, sys, tempfile
import tunedeck.api.app as app_module
from tunedeck.core.settings import Settings
root = pathlib.Path(tempfile.mkdtemp())
app_module.create_app(Settings(data_dir=root / "data", model_roots=str(root)))
heavy = tuple(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy)))))
"""


def _loaded(*modules: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_and_building_the_app_loads_no_model_code() -> None:
    assert [module for module in _loaded(*HEAVY) if module not in LIGHT_DATA] == []
    assert "fastapi" in _loaded("fastapi")  # the check sees what the app does load
