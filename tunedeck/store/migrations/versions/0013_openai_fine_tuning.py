"""OpenAI-compatible fine-tuning: what a job created under `/v1` was asked with (suffix, metadata, method).

Revision ID: 0013_openai_fine_tuning
Revises: 0012_retention_policies
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import JSONColumn, UTCDateTime

revision: str = "0013_openai_fine_tuning"
down_revision: str | None = "0012_retention_policies"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Jobs made before it have no row: they were not created under `/v1`."""
    op.create_table(
        "fine_tuning_requests",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("suffix", sa.String(length=64), nullable=True),
        sa.Column("metadata_pairs", JSONColumn, nullable=False),
        sa.Column("method", JSONColumn, nullable=False),
        sa.Column("hyperparameters", JSONColumn, nullable=False),
        sa.Column("integrations", JSONColumn, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_fine_tuning_requests_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_fine_tuning_requests")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("fine_tuning_requests")
