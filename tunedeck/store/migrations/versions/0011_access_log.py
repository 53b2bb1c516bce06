"""The access log: every read of a user's raw data, by whom, how and when.

Revision ID: 0011_access_log
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import BigIntId, UTCDateTime

revision: str = "0011_access_log"
down_revision: str | None = "0010_deletion_receipts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "access_log",
        sa.Column("id", BigIntId, autoincrement=True, nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("reader_id", sa.String(length=40), nullable=False),
        sa.Column("reader_name", sa.String(length=100), nullable=False),
        sa.Column("object_kind", sa.String(length=20), nullable=False),
        sa.Column("object_id", sa.String(length=200), nullable=False),
        sa.Column("object_label", sa.String(length=300), nullable=False),
        sa.Column("action", sa.String(length=10), nullable=False),
        sa.Column("via", sa.String(length=10), nullable=False),
        sa.Column("client_address", sa.String(length=64), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "object_kind IN ('dataset_version', 'test_set', 'export', 'checkpoint', 'final_model')",
            name=op.f("ck_access_log_object_kind"),
        ),
        sa.CheckConstraint("action IN ('download', 'preview', 'read')", name=op.f("ck_access_log_action")),
        sa.CheckConstraint("via IN ('api', 'web', 'cli')", name=op.f("ck_access_log_via")),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_access_log_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_log")),
    )
    with op.batch_alter_table("access_log", schema=None) as batch_op:
        batch_op.create_index("ix_access_log_owner_id_id", ["owner_id", "id"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("access_log", schema=None) as batch_op:
        batch_op.drop_index("ix_access_log_owner_id_id")
    op.drop_table("access_log")
