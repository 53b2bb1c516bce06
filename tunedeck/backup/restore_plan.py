"""What a restore will create that grants access: users, admins and API tokens, read before anything is written.

A backup is a whole installation, access included; whoever restores it should see who will be
able to sign in before the rows are written (a hand-edited backup could add an admin or a token).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections import Counter
from dataclasses import dataclass, field

from tunedeck.backup.contents import BackupError, BackupInfo, table_member


@dataclass(frozen=True)
class RestorePlan:
    """The users a restore creates (name → role) and how many API tokens each will hold."""

    users: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def admins(self) -> list[str]:
        """The names of the users who will be admins."""
        return sorted(name for name, role in self.users.items() if role == "admin")

    def describe(self) -> str:
        """One line for people: "creates 3 users (admins: root) and 4 API tokens (alice 2, root 2)"."""
        admins = f" (admins: {', '.join(self.admins)})" if self.admins else " (no admin)"
        held = ", ".join(f"{name} {count}" for name, count in sorted(self.tokens.items()))
        tokens = sum(self.tokens.values())
        return (
            f"creates {len(self.users)} user{'s' if len(self.users) != 1 else ''}{admins} and "
            f"{tokens} API token{'s' if tokens != 1 else ''}{f' ({held})' if held else ''}"
        )


def read_restore_plan(
    tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], info: BackupInfo, where: str
) -> RestorePlan:
    """The users and tokens the backup's rows would create; BackupError naming `where` for a damaged member."""
    described = {table.name for table in info.tables}
    users = {row["id"]: row for row in _rows(tar, members, "users", where)} if "users" in described else {}
    tokens = Counter(
        str(users.get(row.get("user_id"), {}).get("name", row.get("user_id")))
        for row in (_rows(tar, members, "api_tokens", where) if "api_tokens" in described else [])
    )
    return RestorePlan({str(row["name"]): str(row["role"]) for row in users.values()}, dict(tokens))


def _rows(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], table: str, where: str) -> list[dict]:
    member = members.get(table_member(table))
    handle = tar.extractfile(member) if member is not None else None
    if handle is None:
        raise BackupError(f"{where}: {table_member(table)} is missing from the backup")
    rows = []
    for number, line in enumerate(io.TextIOWrapper(handle, encoding="utf-8"), start=1):
        try:
            row = json.loads(line)
        except ValueError:
            raise BackupError(f"{where}: {table_member(table)}:{number}: not a JSON object") from None
        if not isinstance(row, dict):
            raise BackupError(f"{where}: {table_member(table)}:{number}: not a JSON object")
        rows.append(row)
    return rows
