"""A key whose secret is not the one recorded under its id: refused at start, by `keys status` and `/health`."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tunedeck.api.app import create_app
from tunedeck.cli.main import app as cli
from tunedeck.core.settings import Settings
from tunedeck.service.privacy.key_checks import MATCHES, MISMATCH, key_check_states, verify_encryption_keys
from tunedeck.storage.encryption import Keyring
from tunedeck.storage.key_file import EncryptionError
from tunedeck.store.store import JobStore


def _write_key(path: Path, key_id: str = "k1") -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(f"{key_id}:{base64.b64encode(secrets.token_bytes(32)).decode()}\n")
    path.chmod(0o600)


def _settings(tmp_path: Path, sqlite_url: str, key_file: Path) -> Settings:
    return Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data", database_url=sqlite_url, encryption_key_file=key_file, storage_url=None
    )


def test_a_wrong_secret_under_a_known_id_is_refused_naming_the_key(tmp_path: Path, sqlite_url: str) -> None:
    key_file = tmp_path / "keys" / "tunedeck.keys"
    _write_key(key_file)
    with JobStore.open(sqlite_url, migrate=False) as jobs:
        right = Keyring.from_file(key_file)
        verify_encryption_keys(jobs, right)  # first use: recorded
        verify_encryption_keys(jobs, right)  # and it matches after
        assert key_check_states(jobs, right) == {"k1": MATCHES}
        _write_key(key_file)  # the same id, other bytes
        wrong = Keyring.from_file(key_file)
        with pytest.raises(EncryptionError) as refused:
            verify_encryption_keys(jobs, wrong)
        assert key_check_states(jobs, wrong) == {"k1": MISMATCH}
    message = str(refused.value)
    assert "'k1'" in message and "\n" not in message and "TUNEDECK_ENCRYPTION_KEY_FILE" in message
    assert base64.b64encode(wrong.keys[0].secret).decode() not in message


def test_the_server_refuses_to_start_and_health_reports_the_storage_unavailable(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "keys" / "tunedeck.keys"
    _write_key(key_file)
    settings = _settings(tmp_path, sqlite_url, key_file)
    with TestClient(create_app(settings)) as client:
        assert client.get("/api/v1/health").json()["storage"] == "ok"
        right = key_file.read_text()
        _write_key(key_file)  # swapped under a running server
        unhealthy = client.get("/api/v1/health")
        assert unhealthy.status_code == 503 and unhealthy.json()["storage"] == "unavailable"
        key_file.write_text(right)
        assert client.get("/api/v1/health").status_code == 200
    _write_key(key_file)
    with pytest.raises(EncryptionError, match="encryption key 'k1' is not the key this installation used"):
        create_app(settings)

    variables = {"DATA_DIR": tmp_path / "data", "DATABASE_URL": sqlite_url, "ENCRYPTION_KEY_FILE": key_file}
    for name, value in variables.items():
        monkeypatch.setenv(f"TUNEDECK_{name}", str(value))
    monkeypatch.delenv("TUNEDECK_STORAGE_URL", raising=False)
    status = CliRunner().invoke(cli, ["keys", "status"])
    assert status.exit_code == 1 and MISMATCH in status.output and "'k1'" in status.output
    rotate = CliRunner().invoke(cli, ["keys", "rotate"])
    assert rotate.exit_code == 1 and "'k1'" in rotate.output and "Traceback" not in rotate.output
