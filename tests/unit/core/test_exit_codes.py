"""The engine's exit statuses keep their numbers: the worker, the CLI and run folders on disk rely on them."""

from __future__ import annotations

import json

from tunedeck.core.exit_codes import ExitCode


def test_exit_codes_keep_their_numbers() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "SUCCEEDED": 0, "FAILED": 1, "REFUSED": 2, "PAUSED": 3, "CANCELLED": 4, "REQUEUE": 5, "RESTART": 6,
    }  # fmt: skip


def test_an_exit_code_is_written_and_read_back_as_a_plain_number() -> None:
    written = json.dumps({"exit": ExitCode.PAUSED})
    assert written == '{"exit": 3}'
    assert ExitCode(json.loads(written)["exit"]) is ExitCode.PAUSED
