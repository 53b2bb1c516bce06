"""A 200,000-row JSONL validates and registers in bounded memory: both stream, neither holds the rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROWS = 200_000

# Streaming keeps one row, the hasher and at most `max_issues` issues alive, so
# peak RSS barely moves (under 1 MB when measured). Holding the rows is what we
# guard against: `load_dataset`, which keeps them, grows peak RSS by about 80 MB
# on this very file (a dict and two strings per row). A 40 MB ceiling sits
# between the two, with room for allocator noise.
LIMIT_MB = 40

_MEASURE = """
import json, resource, sys
from pathlib import Path
from tunedeck.data.validation import validate_file

small, big = Path(sys.argv[1]), Path(sys.argv[2])
validate_file(small)  # imports and first-use allocations happen here, not in the measurement
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = validate_file(big)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kb": after - before, "rows": report.rows_valid, "ok": report.ok,
                  "issues": report.issue_count}))
"""

_MEASURE_REGISTER = """
import json, resource, sys
from pathlib import Path
from tunedeck.data.registry import DatasetRegistry

small, big, root = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
registry = DatasetRegistry(root)
registry.register(small, "warmup")  # imports and first-use allocations happen here
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
version = registry.register(big, "big")
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kb": after - before, "rows": version.manifest.rows}))
"""


def _write_files(tmp_path: Path) -> tuple[Path, Path]:
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as handle:
        for i in range(ROWS):
            handle.write(
                json.dumps(
                    {
                        "prompt": f"Question {i}: what is {i} plus {i}?",
                        "completion": f"The answer is {2 * i}.",
                    }
                )
                + "\n"
            )
    small = tmp_path / "small.jsonl"
    small.write_text('{"prompt": "a", "completion": "b"}\n', encoding="utf-8")
    return small, big


def _measure(script: str, *arguments: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_two_hundred_thousand_rows_validate_in_bounded_memory(tmp_path: Path) -> None:
    measured = _measure(_MEASURE, *_write_files(tmp_path))
    assert measured["rows"] == ROWS and measured["ok"] and measured["issues"] == 0
    assert measured["growth_kb"] < LIMIT_MB * 1024, measured


@pytest.mark.slow
def test_two_hundred_thousand_rows_register_in_bounded_memory(tmp_path: Path) -> None:
    # Registration writes each valid row to the staged version as it is read: the same
    # ceiling holds as for validation (holding the rows would cost about 80 MB).
    measured = _measure(_MEASURE_REGISTER, *_write_files(tmp_path), tmp_path / "registry")
    assert measured["rows"] == ROWS
    assert measured["growth_kb"] < LIMIT_MB * 1024, measured
