"""`tunedeck keys generate | rotate | status` on a local artifact folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunedeck.cli.main import app
from tunedeck.core.settings import Settings
from tunedeck.storage.factory import open_store_from_settings
from tunedeck.storage.key_rotation import key_usage


def _ids(key_file: Path) -> list[str]:
    return [line.split(":", 1)[0] for line in key_file.read_text().splitlines() if line.strip()]


def test_generate_rotate_and_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path / "data"))
    for name in ("TUNEDECK_STORAGE_URL", "TUNEDECK_ENCRYPTION_KEYS", "TUNEDECK_ENCRYPTION_KEY_FILE", "TUNEDECK_S3_SSE"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    key_file = tmp_path / "secrets" / "tunedeck.keys"

    # Objects stored before encryption was turned on.
    open_store_from_settings(Settings()).put_bytes("users/u/old.json", b"{}")  # type: ignore[call-arg]
    no_keys = runner.invoke(app, ["keys", "rotate"])
    assert no_keys.exit_code == 1 and "set TUNEDECK_ENCRYPTION_KEY_FILE" in no_keys.output

    first = runner.invoke(app, ["keys", "generate", "--key-file", str(key_file), "--id", "first"])
    assert first.exit_code == 0, first.output
    assert key_file.stat().st_mode & 0o777 == 0o600 and _ids(key_file) == ["first"]
    monkeypatch.setenv("TUNEDECK_ENCRYPTION_KEY_FILE", str(key_file))
    rotated = runner.invoke(app, ["keys", "rotate"])
    assert rotated.exit_code == 0, rotated.output
    assert "0 re-wrapped, 1 encrypted, 0 already current" in rotated.output

    open_store_from_settings(Settings()).put_bytes("users/u/new.json", b"[]")  # type: ignore[call-arg]
    assert runner.invoke(app, ["keys", "generate", "--key-file", str(key_file), "--id", "second"]).exit_code == 0
    duplicate = runner.invoke(app, ["keys", "generate", "--key-file", str(key_file), "--id", "second"])
    assert duplicate.exit_code == 1 and "already holds a key with id 'second'" in duplicate.output
    assert _ids(key_file) == ["first", "second"]
    again = runner.invoke(app, ["keys", "rotate"])
    assert again.exit_code == 0 and "active key second: 2 re-wrapped, 0 encrypted, 0 already current" in again.output
    status = runner.invoke(app, ["keys", "status"])
    assert status.exit_code == 0 and "second" in status.output and "active" in status.output
    assert key_usage(open_store_from_settings(Settings())) == {"second": 2}  # type: ignore[call-arg]

    key_file.chmod(0o644)
    refused = runner.invoke(app, ["keys", "status"])
    assert refused.exit_code == 1 and "chmod 600" in refused.output and "Traceback" not in refused.output
