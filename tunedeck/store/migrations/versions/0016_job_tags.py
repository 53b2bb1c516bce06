"""Job tags: short labels a job's owner sets to sort and find jobs (one row per job and tag).

Revision ID: 0016_job_tags
Revises: 0015_rental_plans
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_job_tags"
down_revision: str | None = "0015_rental_plans"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision: a new table, nothing earlier changes."""
    op.create_table(
        "job_tags",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("tag", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_tags_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "tag", name=op.f("pk_job_tags")),
    )
    op.create_index("ix_job_tags_tag", "job_tags", ["tag"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_job_tags_tag", table_name="job_tags")
    op.drop_table("job_tags")
