"""GPU tests run only where torch sees a CUDA or ROCm device; elsewhere they are skipped."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu`-marked tests without an accelerator."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        # The marker, not the keyword: a test in a folder named `gpu` (tests/unit/benchmarks/gpu) has the
        # keyword too, and runs on the CPU unless it carries the marker.
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
