"""Datasets: the licence and rights note their owner records (both optional; NULL: not recorded).

Revision ID: 0014_dataset_licence
Revises: 0013_openai_fine_tuning
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_dataset_licence"
down_revision: str | None = "0013_openai_fine_tuning"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Datasets made before it have no recorded licence."""
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("licence", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("rights_note", sa.Text(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("rights_note")
        batch_op.drop_column("licence")
