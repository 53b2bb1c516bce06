"""Users: the dashboard language each one chose (NULL: the browser's).

Revision ID: 0017_user_locale
Revises: 0016_job_tags
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_user_locale"
down_revision: str | None = "0016_job_tags"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision. Users made before it follow their browser's language."""
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("locale", sa.String(length=8), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("locale")
