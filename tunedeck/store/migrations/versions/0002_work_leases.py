"""Work leases: one process at a time builds a named piece of work (an export), across processes.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import UTCDateTime

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "work_leases",
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("holder", sa.String(length=80), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_work_leases")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("work_leases")
