"""One queue for all work: a job waits and runs as a `train` work item, which holds its lease.

Every queued job gets a queued `train` item (in line where the job was: its `queued_at`);
every running or pausing job gets a running one carrying the job's lease and fencing
hash, so a worker that holds a job now keeps holding it. The jobs' own lease columns go.
Downgrading copies the leases of running items back to their jobs and drops the items.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from tunedeck.core.ids import new_id
from tunedeck.store.types import JSONColumn, UTCDateTime

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_jobs = sa.table(
    "jobs",
    sa.column("id", sa.String),
    sa.column("owner_id", sa.String),
    sa.column("state", sa.String),
    sa.column("priority", sa.Integer),
    sa.column("devices_needed", sa.Integer),
    sa.column("queued_at", UTCDateTime()),
    sa.column("started_at", UTCDateTime()),
    sa.column("worker_id", sa.String),
    sa.column("lease_until", UTCDateTime()),
    sa.column("fencing_sha256", sa.String),
    sa.column("max_attempts", sa.Integer),
)
_items = sa.table(
    "work_items",
    sa.column("id", sa.String),
    sa.column("owner_id", sa.String),
    sa.column("kind", sa.String),
    sa.column("state", sa.String),
    sa.column("inputs", JSONColumn),
    sa.column("job_id", sa.String),
    sa.column("devices_needed", sa.Integer),
    sa.column("priority", sa.Integer),
    sa.column("progress", JSONColumn),
    sa.column("worker_id", sa.String),
    sa.column("lease_until", UTCDateTime()),
    sa.column("attempt", sa.Integer),
    sa.column("max_attempts", sa.Integer),
    sa.column("fencing_sha256", sa.String),
    sa.column("created_at", UTCDateTime()),
    sa.column("updated_at", UTCDateTime()),
    sa.column("started_at", UTCDateTime()),
)


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))
        batch_op.drop_index("ix_work_items_queue")
        batch_op.create_index("ix_work_items_queue", ["state", "kind", "priority", "created_at"], unique=False)
    bind = op.get_bind()
    now = datetime.now(UTC)
    waiting = bind.execute(
        sa.select(_jobs).where(_jobs.c.state.in_(["queued", "running", "pausing"])).order_by(_jobs.c.id)
    ).all()
    # Columns first, items after: SQLite drops a column by copying the table, and dropping the old
    # copy would cascade to items that already pointed at it.
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("lease_until")
        batch_op.drop_column("fencing_sha256")
    for job in waiting:
        held = job.state != "queued"
        bind.execute(
            _items.insert().values(
                id=new_id("wi_"),
                owner_id=job.owner_id,
                kind="train",
                state="running" if held else "queued",
                inputs={},
                job_id=job.id,
                devices_needed=job.devices_needed,
                priority=job.priority,
                progress={},
                worker_id=job.worker_id if held else None,
                lease_until=job.lease_until if held else None,
                attempt=1 if held else 0,
                max_attempts=job.max_attempts,
                fencing_sha256=job.fencing_sha256 if held else None,
                created_at=job.queued_at,
                updated_at=now,
                started_at=job.started_at if held else None,
            )
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_until", UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("fencing_sha256", sa.String(length=64), nullable=True))
    bind = op.get_bind()
    held = bind.execute(
        sa.select(_items.c.job_id, _items.c.lease_until, _items.c.fencing_sha256).where(
            _items.c.kind == "train", _items.c.state == "running"
        )
    ).all()
    for row in held:
        bind.execute(
            _jobs.update()
            .where(_jobs.c.id == row.job_id)
            .values(lease_until=row.lease_until, fencing_sha256=row.fencing_sha256)
        )
    bind.execute(_items.delete().where(_items.c.kind == "train"))
    with op.batch_alter_table("work_items", schema=None) as batch_op:
        batch_op.drop_index("ix_work_items_queue")
        batch_op.create_index("ix_work_items_queue", ["state", "kind", "created_at"], unique=False)
        batch_op.drop_column("priority")
