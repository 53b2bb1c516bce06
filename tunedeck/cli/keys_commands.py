"""`tunedeck keys generate | rotate | status`: the keys that encrypt stored artifacts.

The key file (`TUNEDECK_ENCRYPTION_KEY_FILE`) lists key-encryption keys, one
`id:base64key` a line; the last is the active one. `generate` appends a new active
key, `rotate` re-seals every stored object under it (and encrypts objects stored
before encryption was on), `status` counts the objects each key seals.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tunedeck.cli.errors import reported_errors

if TYPE_CHECKING:
    from tunedeck.core.settings import Settings
    from tunedeck.storage.encryption import Keyring
    from tunedeck.store.store import JobStore

app = typer.Typer(help="Generate, rotate and inspect the keys that encrypt stored artifacts.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _configured() -> tuple[Settings, Keyring | None]:
    from tunedeck.core.settings import Settings
    from tunedeck.storage.encryption import Keyring

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    return settings, Keyring.from_settings(settings)


@app.command("generate")
def generate(
    key_file: Path = typer.Option(..., "--key-file", help="Key file to append to (created 0600 when missing)."),
    key_id: str | None = typer.Option(None, "--id", help="Id of the new key (default: k<date><time>)."),
) -> None:
    """Append a new random key to the key file; it becomes the active key for new objects."""
    from tunedeck.core.errors import StorageError
    from tunedeck.storage.encryption import Keyring
    from tunedeck.storage.key_file import EncryptionError, generate_key_line, write_key_file_line

    new_id = key_id or time.strftime("k%Y%m%d%H%M%S", time.gmtime())
    with reported_errors():
        if key_file.exists():
            known = Keyring.from_file(key_file)  # refuses a file others can read before adding to it
            if new_id in known.ids:
                raise EncryptionError(f"{key_file}: already holds a key with id {new_id!r}; choose another --id")
        try:
            write_key_file_line(key_file, generate_key_line(new_id))
        except OSError as error:
            raise StorageError(f"cannot write the key file {key_file}: {error.strerror}") from None
    console.print(f"added key [bold]{new_id}[/bold] to {key_file}; it is now the active key", highlight=False)
    console.print(
        "Set TUNEDECK_ENCRYPTION_KEY_FILE to this file for the server, workers and CLI, then run "
        "`tunedeck keys rotate` to re-seal stored objects under the new key. Keep a copy of the file: "
        "without it nothing stored can be read.",
        markup=False,
        highlight=False,
    )


@app.command("rotate")
def rotate() -> None:
    """Re-seal every stored object under the active key and encrypt objects stored unencrypted."""
    from tunedeck.storage.encryption import no_keyring_error
    from tunedeck.storage.factory import open_store_from_settings
    from tunedeck.storage.key_rotation import rotate_keys

    with reported_errors():
        settings, keyring = _configured()
        if keyring is None:
            raise no_keyring_error("keys rotate")
        _verified(settings, keyring)  # re-sealing everything under a wrong key would lose it all
        store = open_store_from_settings(settings)
        columns = (TextColumn("rotating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task("rotating", total=None)
            report = rotate_keys(
                store, keyring, on_progress=lambda done, total, _key: progress.update(task, completed=done, total=total)
            )
    console.print(
        f"active key {report.active_key}: {report.rewrapped} re-wrapped, {report.encrypted} encrypted, "
        f"{report.already_current} already current",
        highlight=False,
    )


def _verified(settings: Settings, keyring: Keyring) -> None:
    """EncryptionError naming a key whose check value differs from its recorded one (recording new keys')."""
    from tunedeck.service.privacy.key_checks import verify_encryption_keys

    with _job_store(settings) as jobs:
        verify_encryption_keys(jobs, keyring)


def _key_checks(settings: Settings, keyring: Keyring | None) -> dict[str, str]:
    """Each key's check value against the one recorded for its id (see `service.privacy.key_checks`)."""
    from tunedeck.service.privacy.key_checks import key_check_states

    with _job_store(settings) as jobs:
        return key_check_states(jobs, keyring)


def _job_store(settings: Settings) -> JobStore:
    """The database the keys' check values are recorded in (migrated first, as a server would)."""
    from tunedeck.store.store import JobStore

    return JobStore.open(settings.resolved_database_url())


@app.command("status")
def status() -> None:
    """Which key ids seal how many stored objects (and how many are unencrypted)."""
    from tunedeck.service.privacy.key_checks import MISMATCH, mismatch_error
    from tunedeck.storage.factory import open_store_from_settings
    from tunedeck.storage.key_rotation import PLAINTEXT, key_usage

    with reported_errors():
        settings, keyring = _configured()
        usage = key_usage(open_store_from_settings(settings))
        checks = _key_checks(settings, keyring)
    ids = keyring.ids if keyring is not None else []
    table = Table("key", "objects", "in the keyring", "check value")
    for key_id in dict.fromkeys([*ids, *usage]):
        if key_id == PLAINTEXT:
            state = "-"
        elif keyring is not None and key_id == keyring.active.id:
            state = "active"
        else:
            state = "yes" if key_id in ids else "missing: add it to the key file"
        table.add_row(key_id, str(usage.get(key_id, 0)), state, checks.get(key_id, "-"))
    console.print(table)
    mismatched = [key_id for key_id, check in checks.items() if check == MISMATCH]
    if mismatched:
        err_console.print(str(mismatch_error(mismatched[0])), markup=False, highlight=False)
        raise typer.Exit(1)
    if keyring is None:
        console.print("encryption is off: TUNEDECK_ENCRYPTION_KEY_FILE is not set", highlight=False)
