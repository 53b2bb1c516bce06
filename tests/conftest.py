"""Suite-wide fixtures live in tests/fixtures/, one module per area, loaded here."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

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


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collecting imported (see `_frozen_survivors`)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope="module")
def _frozen_survivors() -> Iterator[None]:
    """After each test module: collect its garbage, then freeze what survives (imports, session fixtures).

    A full garbage collection walks every object the process holds. A test process that imported
    torch, transformers and the whole package holds millions, and the code under test collects
    on purpose (memory measurements before each step, the trainers' own clean-ups): each of those
    took seconds late in a run. Frozen objects are left out of every later collection, so a
    collection costs what the current module made; garbage is still collected first, so nothing
    the module dropped is kept.
    """
    yield
    gc.collect()
    gc.freeze()
