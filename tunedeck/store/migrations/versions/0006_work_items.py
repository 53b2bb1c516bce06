"""Work items: exports, preflights, inspections and generations queued for workers like jobs.

The work leases the API took to build an export once are replaced by the items' own
claims and their dedup key: their table goes (it held only leases in flight).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import JSONColumn, UTCDateTime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "work_items",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("inputs", JSONColumn, nullable=False),
        sa.Column("dedup_key", sa.String(length=64), nullable=True),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.Column("devices_needed", sa.Integer(), nullable=False),
        sa.Column("progress", JSONColumn, nullable=False),
        sa.Column("result", JSONColumn, nullable=True),
        sa.Column("error", JSONColumn, nullable=True),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("fencing_sha256", sa.String(length=64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_work_items_owner_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_work_items_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_work_items")),
        sa.UniqueConstraint("kind", "dedup_key", name=op.f("uq_work_items_kind_dedup_key")),
    )
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.create_index("ix_work_items_queue", ["state", "kind", "created_at"], unique=False)
        batch_op.create_index("ix_work_items_owner_id_id", ["owner_id", "id"], unique=False)
    op.drop_table("work_leases")


def downgrade() -> None:
    """Revert this revision."""
    op.create_table(
        "work_leases",
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("holder", sa.String(length=80), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_work_leases")),
    )
    op.drop_table("work_items")
