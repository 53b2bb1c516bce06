"""Work items: the machines a job spans, so only a worker that reaches that many (a Ray cluster) claims it.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Items made before it ran on one machine: 1."""
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("machines_needed", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_column("machines_needed")
