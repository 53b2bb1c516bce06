"""Reaching a Ray cluster: an address nobody answers at is refused at once, with the reason."""

from __future__ import annotations

import time

import pytest

from tests.fixtures.live_server import free_port
from tunedeck.engine.distributed.ray_connect import RayUnavailableError, check_reachable, forwarded_env


def test_a_closed_port_is_refused_quickly() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(RayUnavailableError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("address", "message"),
    [("ray://head:10001", "Ray Client address is not supported"), ("head", "expected host:port"), (":1", "host:port")],
)
def test_addresses_that_are_not_a_head_are_refused(address: str, message: str) -> None:
    with pytest.raises(RayUnavailableError, match=message):
        check_reachable(address)


def test_auto_is_left_to_ray() -> None:
    check_reachable("auto")


def test_the_ray_workers_get_what_the_engine_reads_and_no_secret() -> None:
    env = {
        "TUNEDECK_MEMORY_CAP": "8GiB",
        "TUNEDECK_FAILPOINTS": "x",
        "TUNEDECK_DATABASE_URL": "postgresql://user:pw@db/tunedeck",
        "HF_HUB_OFFLINE": "1",
        "HF_TOKEN": "hf_secret",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONHASHSEED": "0",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    assert forwarded_env(env) == {
        "TUNEDECK_MEMORY_CAP": "8GiB",
        "TUNEDECK_FAILPOINTS": "x",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONHASHSEED": "0",
    }
