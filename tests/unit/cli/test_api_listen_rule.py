"""The listening rule of `tunedeck serve`: loopback always, beyond only with --allow-remote and users."""

from __future__ import annotations

import pytest

from tunedeck.cli.serve_command import ListenRefused, check_listen_address, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)
    check_listen_address(host, allow_remote=False, users_before_start=0)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.internal", "10.0.0.1"])
def test_remote_hosts_need_allow_remote_and_existing_users(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ListenRefused, match="--allow-remote"):
        check_listen_address(host, allow_remote=False, users_before_start=3)
    with pytest.raises(ListenRefused, match="first start"):
        check_listen_address(host, allow_remote=True, users_before_start=0)
    check_listen_address(host, allow_remote=True, users_before_start=1)
