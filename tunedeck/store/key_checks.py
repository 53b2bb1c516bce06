"""The check values of the encryption keys, as recorded when each key was first used."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select

from tunedeck.store.db import Database
from tunedeck.store.models import EncryptionKeyCheck
from tunedeck.store.types import utcnow


class KeyCheckRepository:
    """Compare keys' check values with the recorded ones; record those of keys seen for the first time."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def recorded(self, key_ids: list[str]) -> dict[str, str]:
        """The recorded check value of each of `key_ids` that has one."""
        with self.db.read() as session:
            rows = session.scalars(select(EncryptionKeyCheck).where(EncryptionKeyCheck.key_id.in_(key_ids)))
            return {row.key_id: row.check_value for row in rows}

    def record_new(self, values: Mapping[str, str]) -> dict[str, str]:
        """Record the values of keys without one (in one transaction); every key's recorded value after it."""
        with self.db.write() as session:
            known = {
                row.key_id: row.check_value
                for row in session.scalars(select(EncryptionKeyCheck).where(EncryptionKeyCheck.key_id.in_(values)))
            }
            for key_id, value in values.items():
                if key_id not in known:
                    session.add(EncryptionKeyCheck(key_id=key_id, check_value=value, recorded_at=utcnow()))
                    known[key_id] = value
        return known
