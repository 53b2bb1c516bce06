"""Rental plans: a machine's rental planned around an experiment's phases, and when it started.

Revision ID: 0015_rental_plans
Revises: 0014_dataset_licence
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import JSONColumn, UTCDateTime

revision: str = "0015_rental_plans"
down_revision: str | None = "0014_dataset_licence"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision: a new table, nothing earlier changes."""
    op.create_table(
        "rental_plans",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("machine", JSONColumn, nullable=False),
        sa.Column("price_per_hour", sa.Float(), nullable=True),
        sa.Column("margin_share", sa.Float(), nullable=False),
        sa.Column("rental_days", sa.Integer(), nullable=True),
        sa.Column("workload", JSONColumn, nullable=False),
        sa.Column("figures", JSONColumn, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_rental_plans_owner_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_rental_plans_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rental_plans")),
    )
    op.create_index(op.f("ix_rental_plans_experiment_id"), "rental_plans", ["experiment_id"], unique=False)
    op.create_index("ix_rental_plans_owner_id_id", "rental_plans", ["owner_id", "id"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_rental_plans_owner_id_id", table_name="rental_plans")
    op.drop_index(op.f("ix_rental_plans_experiment_id"), table_name="rental_plans")
    op.drop_table("rental_plans")
