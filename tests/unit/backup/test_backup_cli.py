"""`tunedeck backup create | restore` from the configured installation: summaries and one-line errors."""

from __future__ import annotations

import io
import json
import secrets
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.fixtures.installations import every_row, fill, new_installation, use_key
from tunedeck.cli.main import app
from tunedeck.storage.factory import open_store

runner = CliRunner()


@pytest.fixture(autouse=True)
def _configured_by_data_dir_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATABASE_URL", "STORAGE_URL", "S3_ENDPOINT_URL", "ENCRYPTION_KEYS", "ENCRYPTION_KEY_FILE"):
        monkeypatch.delenv(f"TUNEDECK_{name}", raising=False)


def _backup(monkeypatch: pytest.MonkeyPatch, data_dir: Path, *args: str) -> Result:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(data_dir))
    return runner.invoke(app, ["backup", *args])


def _one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: "), result.output
    return " ".join(lines)


def test_an_unencrypted_backup_round_trips_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = new_installation(tmp_path / "old")
    fill(source, tmp_path / "work")
    out = tmp_path / "site.tar"

    refused = _backup(monkeypatch, source.folder, "create", "--out", str(out), "--with-artifacts")
    assert "no encryption key is configured: set TUNEDECK_ENCRYPTION_KEY_FILE" in _one_line_error(refused)
    assert not out.exists()

    made = _backup(monkeypatch, source.folder, "create", "--out", str(out), "--with-artifacts", "--unencrypted")
    assert made.exit_code == 0, made.output
    assert "not encrypted" in made.output and "dataset versions" in made.output

    restored = _backup(monkeypatch, tmp_path / "new", "restore", str(out))
    assert restored.exit_code == 0, restored.output
    assert "files verified" in restored.output and "│ 3 " in restored.output
    assert every_row(new_installation(tmp_path / "new").url) == every_row(source.url)

    again = _backup(monkeypatch, tmp_path / "new", "restore", str(out))
    assert (
        "the target is not empty: the database holds 1 row in users, 1 row in api_tokens, 1 row in datasets"
        in _one_line_error(again)
    )


def test_a_wrong_key_a_tampered_file_or_a_missing_key_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = use_key(monkeypatch)  # the installation's store is encrypted with the same key
    folder = tmp_path / "old"
    source = new_installation(folder, store=open_store((folder / "artifacts").resolve().as_uri(), keyring=keyring))
    fill(source, tmp_path / "work")
    out = tmp_path / "site.tdbak"
    made = _backup(monkeypatch, source.folder, "create", "--out", str(out), "--with-artifacts")
    assert made.exit_code == 0 and "encrypted" in made.output and "not encrypted" not in made.output

    tampered = tmp_path / "tampered.tdbak"
    body = bytearray(out.read_bytes())
    body[len(body) // 2] ^= 0x01
    tampered.write_bytes(bytes(body))
    assert str(tampered) in _one_line_error(_backup(monkeypatch, tmp_path / "a", "restore", str(tampered)))

    use_key(monkeypatch, "k1", secrets.token_bytes(32))  # same id, another secret
    assert str(out) in _one_line_error(_backup(monkeypatch, tmp_path / "b", "restore", str(out)))

    monkeypatch.delenv("TUNEDECK_ENCRYPTION_KEYS")
    missing = _one_line_error(_backup(monkeypatch, tmp_path / "c", "restore", str(out)))
    assert "encrypted and no key is configured: set TUNEDECK_ENCRYPTION_KEY_FILE" in missing
    for folder in ("a", "b", "c"):  # nothing was restored anywhere
        assert not (tmp_path / folder / "artifacts").exists() or not list((tmp_path / folder / "artifacts").iterdir())

    use_key(monkeypatch, "k1", keyring.active.secret)  # the right key: restored, and stored sealed again
    restored = _backup(monkeypatch, tmp_path / "d", "restore", str(out))
    assert restored.exit_code == 0, restored.output
    stored = [path for path in (tmp_path / "d" / "artifacts").rglob("*") if path.is_file()]
    assert stored and all(path.read_bytes().startswith(b"TDENC") for path in stored)


def test_a_file_that_is_not_a_backup_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_backup = tmp_path / "notes.tar"
    import tarfile

    with tarfile.open(not_backup, "w") as tar:
        tar.add(__file__, arcname="notes.py")
    assert f"{not_backup}: not a tunedeck backup (no backup.json)" in _one_line_error(
        _backup(monkeypatch, tmp_path / "new", "restore", str(not_backup))
    )
    assert "no such backup file" in _one_line_error(
        _backup(monkeypatch, tmp_path / "new", "restore", str(tmp_path / "absent.tdbak"))
    )


def test_backing_up_a_data_dir_without_a_database_names_the_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _backup(monkeypatch, tmp_path / "nothing", "create", "--out", str(tmp_path / "b.tar"), "--unencrypted")
    assert f"{tmp_path / 'nothing' / 'tunedeck.db'}: no such database" in _one_line_error(result)
    assert not (tmp_path / "nothing" / "tunedeck.db").exists() and not (tmp_path / "b.tar").exists()


def _forge_admin(backup: Path, forged: Path) -> None:
    """A hand-edited copy of an unencrypted backup: one more user, an admin, as a probe once made."""
    with tarfile.open(backup) as tar:
        members = {member.name: tar.extractfile(member).read() for member in tar.getmembers() if member.isfile()}
    info = json.loads(members["backup.json"])
    users_member = next(name for name in members if name.endswith("users.jsonl"))
    row = json.loads(members[users_member].splitlines()[0])
    row.update(id=row["id"][:-4] + "beef", name="mallory", role="admin")
    members[users_member] += (json.dumps(row) + "\n").encode()
    next(table for table in info["tables"] if table["name"] == "users")["rows"] += 1
    members["backup.json"] = json.dumps(info).encode()
    with tarfile.open(forged, "w") as tar:
        for name, body in members.items():
            entry = tarfile.TarInfo(name)
            entry.size = len(body)
            tar.addfile(entry, io.BytesIO(body))


def test_with_a_key_configured_an_unencrypted_backup_is_refused_unless_allowed_and_its_admins_are_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = new_installation(tmp_path / "old")
    fill(source, tmp_path / "work")
    plain, forged = tmp_path / "site.tar", tmp_path / "forged.tar"
    made = _backup(monkeypatch, source.folder, "create", "--out", str(plain), "--with-artifacts", "--unencrypted")
    assert made.exit_code == 0, made.output
    _forge_admin(plain, forged)
    use_key(monkeypatch)

    refused = _one_line_error(_backup(monkeypatch, tmp_path / "new", "restore", str(forged)))
    assert "not encrypted although an encryption key is configured" in refused and "--allow-unencrypted" in refused
    # Nothing was written: the restore below finds the target empty, as a restore requires.
    allowed = _backup(monkeypatch, tmp_path / "new", "restore", "--allow-unencrypted", str(forged))
    assert allowed.exit_code == 0, allowed.output
    plan_line = next(line for line in allowed.output.splitlines() if line.startswith("this restore creates"))
    assert "2 users (admins: alice, mallory)" in plan_line and "1 API token (alice 1)" in plan_line
    assert allowed.output.index("this restore creates") < allowed.output.index("restored ")
    names = {row["name"]: row["role"] for row in every_row(new_installation(tmp_path / "new").url)["users"]}
    assert names == {"alice": "admin", "mallory": "admin"}  # the edit is what the plan line warned of
