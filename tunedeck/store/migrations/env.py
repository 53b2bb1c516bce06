"""Alembic environment: run by `tunedeck.store.db.upgrade_database` with an open connection.

Batch mode is on so that later migrations can alter tables on SQLite, which
rebuilds a table instead of altering it in place.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from tunedeck.store.db import create_engine_for
from tunedeck.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations() -> None:
    """Use the caller's connection, or open one from `sqlalchemy.url` (command-line use)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine_for(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as own_connection:
            _run(own_connection)
            own_connection.commit()
    finally:
        engine.dispose()


run_migrations()
