"""Retention: owners' policies (user-wide and per dataset) and when a version's raw data was deleted.

Revision ID: 0012_retention_policies
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import UTCDateTime

revision: str = "0012_retention_policies"
down_revision: str | None = "0011_access_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Versions made before it keep their data: purged_at NULL."""
    op.create_table(
        "retention_policies",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=True),
        sa.Column("raw_data_days", sa.Integer(), nullable=True),
        sa.Column("checkpoint_days", sa.Integer(), nullable=True),
        sa.Column("job_days", sa.Integer(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_retention_policies_owner_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_retention_policies_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retention_policies")),
        sa.UniqueConstraint("owner_id", "dataset_id", name=op.f("uq_retention_policies_owner_id_dataset_id")),
    )
    op.create_index(op.f("ix_retention_policies_owner_id"), "retention_policies", ["owner_id"], unique=False)
    op.create_index(op.f("ix_retention_policies_dataset_id"), "retention_policies", ["dataset_id"], unique=False)
    with op.batch_alter_table("dataset_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("purged_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("dataset_versions", schema=None) as batch_op:
        batch_op.drop_column("purged_at")
    op.drop_index(op.f("ix_retention_policies_dataset_id"), table_name="retention_policies")
    op.drop_index(op.f("ix_retention_policies_owner_id"), table_name="retention_policies")
    op.drop_table("retention_policies")
