"""Suite-wide fixtures live in tests/fixtures/, one module per area, loaded here."""

from __future__ import annotations

import os

import pytest

pytest_plugins = [
    "tests.fixtures.models",
    "tests.fixtures.data",
    "tests.fixtures.live_server",
    "tests.fixtures.services",
    "tests.fixtures.ray_cluster",
    "tests.fixtures.app",
    "tests.fixtures.trackers",
]

# The compute threads of each process torch runs in: this one, and the servers, workers and
# engines it starts, which inherit the environment.
TORCH_THREADS = "1"


def pytest_configure(config: pytest.Config) -> None:
    """One OpenMP thread per process, unless the environment already chose a number.

    The suite runs several processes at once (pytest-xdist workers, each with servers and engine
    children) on a machine with few cores, and the tiny models' operations are far too small to
    gain from threads. Several threads per process then wait on each other whenever a core is busy
    elsewhere: on a loaded 2-core machine ten steps of the tiny Llama took 33 s with 2 threads and
    2.3 s with one. torch reads the variable when it loads, which is after this hook.
    """
    os.environ.setdefault("OMP_NUM_THREADS", TORCH_THREADS)
