#!/usr/bin/env python3
"""Check this machine before tunedeck is installed (the first thing `make install` runs; runnable alone).

Standard library only. Prints the OS, C library, Python, free disk and each GPU, the torch
variant it chose (cpu, cuda, rocm, apple) and why, and every problem with its fix; exits 1
on a blocking one, before anything is downloaded. TORCH_VARIANT=cpu|cuda|rocm forces a variant;
TORCH_INDEX_URL names a wheel index for torch.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

if sys.version_info < (3, 10):  # noqa: UP036 -- this script runs on whatever Python the machine has
    # The check itself needs 3.10; tunedeck's own range is in pyproject.toml (requires-python).
    print(f"Python {sys.version.split()[0]} ({sys.executable}) is too old to check this machine.", file=sys.stderr)
    print(
        "  fix: install Python 3.11 (python3.11 and python3.11-venv), then `make run PYTHON=python3.11`",
        file=sys.stderr,
    )
    sys.exit(1)

sys.path.insert(0, str(REPO))

from tunedeck.hostcheck.main import main  # noqa: E402 -- after the version check, which must run on any Python

if __name__ == "__main__":
    sys.exit(main(repo=REPO))
