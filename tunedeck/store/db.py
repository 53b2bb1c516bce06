"""Engines, sessions and migrations for SQLite and PostgreSQL.

SQLite runs in WAL mode (readers never block the writer), with foreign keys on
and a busy timeout; transactions that write start with `BEGIN IMMEDIATE`, so two
writers queue for the lock up front instead of failing when a read lock cannot
be upgraded. PostgreSQL goes through psycopg 3.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from tunedeck.core.errors import TunedeckError

SQLITE_BUSY_TIMEOUT_S = 30.0
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_BEGIN_OPTION = "tunedeck_sqlite_begin"


def normalise_url(url: str) -> str:
    """Use psycopg 3 for `postgresql://` URLs; leave other URLs alone."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def sqlite_files(url: str) -> list[Path]:
    """The files of a SQLite database (the database, its write-ahead log and shared memory); none for others."""
    parsed = make_url(normalise_url(url))
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return []
    database = Path(parsed.database)
    return [database, *(database.with_name(database.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def create_engine_for(url: str, *, sqlite_foreign_keys: bool = True, **kwargs: Any) -> Engine:
    """An engine for `url`: SQLite with WAL, foreign keys and a busy timeout; PostgreSQL via psycopg.

    `sqlite_foreign_keys=False` is for migrations only (see `upgrade_database`).
    """
    url = normalise_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            **kwargs,
        )
        _configure_sqlite(engine, foreign_keys=sqlite_foreign_keys)
        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, **kwargs)
    raise TunedeckError(f"unsupported database URL {parsed.drivername!r}: use sqlite:/// or postgresql://")


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so "begin" below decides how each one starts.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable in WAL mode up to the last commit
        # Deleted rows are overwritten with zeros, so deleted data does not linger in free pages.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


_WRITE_LOCKS: dict[str, threading.RLock] = {}
# The write transaction a use case opened in this thread or task, which repository calls inside it join.
_OPEN_WRITE: ContextVar[tuple[Database, Session] | None] = ContextVar("tunedeck_open_write", default=None)
_WRITE_LOCKS_GUARD = threading.Lock()


def _sqlite_write_lock(engine: Engine) -> threading.RLock:
    """The process-wide writer lock of one SQLite file (created on first use)."""
    key = str(Path(engine.url.database or ":memory:").resolve())
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(key, threading.RLock())


class Database:
    """An engine and its session factory; `read()` and `write()` open one transaction each."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def connect(cls, url: str) -> Database:
        """A Database for `url` (the schema must already be migrated: see `upgrade_database`)."""
        return cls(create_engine_for(url))

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read transaction; rows returned stay readable after it closes.

        Inside a write transaction of this database (see `write`) it reads in that one, so a use
        case sees what it wrote and checks what it is about to change in the same transaction.
        """
        joined = self._open_write()
        if joined is not None:
            yield joined
            return
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction: `BEGIN IMMEDIATE` on SQLite, committed on success, rolled back on error.

        The outermost `write()` owns the transaction. A `write()` opened inside it (a repository
        called by a use case that opened one) joins it as a savepoint: its changes commit with the
        outer transaction, and an error inside it undoes only its own changes. So a service that
        checks and then writes through several repositories does it in one transaction.

        On SQLite, writers in this process also queue on a lock per database file:
        SQLite's own busy handler sleeps in growing steps (up to 100 ms), which
        would otherwise dominate tail latency when threads contend.
        """
        joined = self._open_write()
        if joined is not None:
            with joined.begin_nested():
                yield joined
            return
        guard = _sqlite_write_lock(self.engine) if self.dialect == "sqlite" else nullcontext()
        with guard, self._sessions() as session:
            opened = _OPEN_WRITE.set((self, session))
            try:
                if self.dialect == "sqlite":
                    # Starts the transaction now, holding the write lock until commit.
                    session.connection(execution_options={_BEGIN_OPTION: "IMMEDIATE"})
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
            finally:
                _OPEN_WRITE.reset(opened)

    def _open_write(self) -> Session | None:
        """The session of the write transaction this thread or task has open on this database, if any."""
        open_write = _OPEN_WRITE.get()
        return open_write[1] if open_write is not None and open_write[0] is self else None

    def scrub_deleted_data(self) -> str:
        """Make deleted rows unreadable from the database's files; returns what was done, for a receipt.

        SQLite already zeroes deleted rows (`secure_delete`), but the write-ahead log still
        holds older copies of the pages until it is checkpointed and truncated. PostgreSQL
        keeps dead row versions until VACUUM reuses their space, which tunedeck leaves to
        the server's autovacuum (the operator's database, not a file tunedeck owns).
        """
        if self.dialect != "sqlite":
            return "deleted rows left to PostgreSQL's autovacuum, which reclaims their space"
        with self.engine.connect() as connection:
            busy, _log, _moved = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if busy:
            # A reader held an older snapshot: the log is copied back next time, when it is free.
            return "deleted rows zeroed; the write-ahead log is truncated at its next checkpoint"
        return "deleted rows zeroed, write-ahead log truncated"

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def upgrade_database(url: str, revision: str = "head") -> None:
    """Run the packaged Alembic migrations up to `revision` (no alembic.ini needed).

    On SQLite, foreign keys are not enforced while migrating: SQLite changes a table by
    copying it and dropping the old one, and dropping `jobs` with enforcement on would
    delete every row that points at a job (events, metrics, checkpoints). The keys are
    checked once the migrations ran, and a violation undoes them all.
    """
    engine = create_engine_for(url, sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection:
            upgrade_connection(connection, revision)
            if engine.dialect.name == "sqlite":
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    connection.rollback()
                    raise TunedeckError(f"migrating to {revision} broke foreign keys: {broken[:5]}")
            connection.commit()
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The migration revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine_for(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def truncate_all(url: str) -> None:
    """Delete every row of every tunedeck table (tests use it to reuse one migrated database)."""
    from tunedeck.store.models import Base

    engine = create_engine_for(url)
    try:
        with engine.begin() as connection:
            tables = [table.name for table in Base.metadata.sorted_tables]
            if engine.dialect.name == "postgresql":
                connection.execute(text(f"TRUNCATE TABLE {', '.join(tables)} RESTART IDENTITY CASCADE"))
            else:
                for name in reversed(tables):
                    connection.execute(text(f"DELETE FROM {name}"))
    finally:
        engine.dispose()


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    """Run the packaged migrations up to `revision` on an open connection, inside its transaction if it has one.

    On SQLite the connection's engine should not enforce foreign keys (see `upgrade_database`).
    """
    from alembic import command

    config = _alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def migration_revisions() -> list[str]:
    """Every revision this code can migrate to, oldest first; the last one is the head."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config())
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


def _alembic_config() -> Any:
    """Alembic's configuration for the packaged migrations (no alembic.ini needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config
