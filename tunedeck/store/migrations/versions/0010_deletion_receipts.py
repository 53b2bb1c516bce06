"""Deletion receipts: what deleting a dataset, job, export or user removed, and where.

Revision ID: 0010_deletion_receipts
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import JSONColumn, UTCDateTime

revision: str = "0010_deletion_receipts"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "deletion_receipts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("target_kind", sa.String(length=20), nullable=False),
        sa.Column("target_id", sa.String(length=200), nullable=False),
        sa.Column("target_label", sa.String(length=300), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False, server_default="request"),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("requested_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("work_item_id", sa.String(length=40), nullable=True),
        sa.Column("removed", JSONColumn, nullable=False),
        sa.CheckConstraint(
            "target_kind IN ('dataset', 'dataset_version', 'job', 'export', 'user')",
            name=op.f("ck_deletion_receipts_target_kind"),
        ),
        sa.CheckConstraint("state IN ('pending', 'done', 'failed')", name=op.f("ck_deletion_receipts_state")),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_deletion_receipts_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deletion_receipts")),
    )
    with op.batch_alter_table("deletion_receipts", schema=None) as batch_op:
        batch_op.create_index("ix_deletion_receipts_owner_id_id", ["owner_id", "id"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("deletion_receipts")
