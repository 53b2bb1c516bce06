"""Base models: who allowed the model's own code to run, and when (trust_remote_code is refused otherwise).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tunedeck.store.types import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("base_models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("remote_code_allowed_by", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("remote_code_allowed_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("base_models", schema=None) as batch_op:
        batch_op.drop_column("remote_code_allowed_at")
        batch_op.drop_column("remote_code_allowed_by")
