"""Per-user quotas: running and queued jobs, stored bytes, device-hours per period.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import UTCDateTime

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "quotas",
        sa.Column("subject", sa.String(length=40), nullable=False),
        sa.Column("running_jobs", sa.Integer(), nullable=True),
        sa.Column("queued_jobs", sa.Integer(), nullable=True),
        sa.Column("storage_bytes", sa.BigInteger(), nullable=True),
        sa.Column("device_hours", sa.Float(), nullable=True),
        sa.Column("period_days", sa.Integer(), nullable=True),
        sa.Column("updated_by", sa.String(length=40), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("subject", name=op.f("pk_quotas")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("quotas")
