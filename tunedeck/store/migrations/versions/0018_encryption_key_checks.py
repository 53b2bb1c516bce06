"""Encryption keys: the check value of each key, recorded when it is first used.

Revision ID: 0018_encryption_key_checks
Revises: 0017_user_locale
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import UTCDateTime

revision: str = "0018_encryption_key_checks"
down_revision: str | None = "0017_user_locale"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Keys in use before it are recorded the next time a server or worker starts."""
    op.create_table(
        "encryption_key_checks",
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("check_value", sa.String(length=64), nullable=False),
        sa.Column("recorded_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_encryption_key_checks")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("encryption_key_checks")
