"""The database under the task store (``serve.tasks.taskstore``): its tables, the engine per URL (SQLite's WAL and
locks, PostgreSQL's connect timeout) and the columns added since older stores were made.

Why a module of its own: the schema and the connection setup change for other reasons than the store's queries
(``serve.tasks.retention`` and the tests read the tables directly; ``serve.tasks.taskstore`` re-exports them).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import sqlalchemy as sa

from flows.key_revocations import make_table as make_revocations_table
from flows.task_store_check import connect_args
from serve.security.private_files import private_sqlite

metadata = sa.MetaData()

#: zlib's level for results: 6 (its default) stores a hybrid task's result in 0.30 of its JSON's bytes, about 12 ms to
#: compress 260 KB; 9 saves 0.3% more for 23% more time, 1 keeps 19% more bytes (``benchmarks/task_store_size.py``).
RESULT_ZLIB_LEVEL = 6


class CompressedJSON(sa.TypeDecorator):
    """JSON kept as zlib-compressed UTF-8 bytes: a result is written once and read whole, and its rows repeat the same
    keys and much of the same text, so it takes about a third of the space; None stays SQL NULL."""

    impl = sa.LargeBinary
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> bytes | None:
        if value is None:
            return None
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return zlib.compress(text.encode("utf-8"), RESULT_ZLIB_LEVEL)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return None if value is None else json.loads(zlib.decompress(value))


tasks = sa.Table(
    "tasks", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("flow", sa.String(200), nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("queries", sa.JSON, nullable=False),
    sa.Column("steps", sa.JSON, nullable=False),          # step ids in run order
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
    sa.Column("current_step", sa.String(200)),
    sa.Column("steps_done", sa.Integer, nullable=False, default=0),
    sa.Column("rows_done", sa.Integer, nullable=False, default=0),
    sa.Column("step_progress", sa.JSON, nullable=False),  # step id -> {status, rows_in, rows_out, seconds}
    sa.Column("log", sa.JSON, nullable=False),            # lines
    sa.Column("error", sa.Text),
    sa.Column("result", sa.JSON),                         # results of stores before result_z: read, never written
    sa.Column("result_z", CompressedJSON),                # the result (``TaskStore.task`` reads either as "result")
    # GET /tasks pages one owner's tasks newest first by (created, id): a range read of this index, not a sort.
    sa.Index("ix_tasks_owner_created_id", "owner", "created", "id"),
)

chats = sa.Table(
    "chats", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False, index=True),
    sa.Column("task_id", sa.String(32), nullable=False),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("column", sa.String(200), nullable=False),
    sa.Column("messages", sa.JSON, nullable=False),       # [{role, content, ...}]
    sa.Column("created", sa.Float, nullable=False),
)

#: Indices made through the service (``serve.indices.indices``): who may change them, and the ingestion running.
indices = sa.Table(
    "indices", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("spec", sa.String(200), nullable=False),     # the built-in ingest spec every upload uses
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("ingest_task", sa.String(32)),               # the last ingestion's task id
    sa.Column("shared", sa.Boolean, nullable=False, server_default=sa.false()),  # searchable by every key
)

#: Columns added to a table after stores were made with it: ``create_all`` makes missing tables only.
_ADDED_COLUMNS = {indices: ("shared",), tasks: ("result_z",)}

#: Indexes added to a table after stores were made with it (``create_all`` skips a table that exists, indexes too).
_ADDED_INDEXES = ("ix_tasks_owner_created_id",)

#: The PostgreSQL advisory lock that makes replicas starting together migrate one after the other.
_PG_MIGRATE_LOCK = 0x7E55E7B


#: The execution option of TaskStore's read-only connections.
READ_ONLY = "tessera_read_only"


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    connection.isolation_level = None  # transactions are begun below, not by the driver
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str) -> sa.Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout, and its file made private to this user
    (``serve.security.private_files``: it holds every key's queries and results)."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:" and not parsed.database.startswith("file:"):
            private_sqlite(parsed.database)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        # A write lock from the start: a read-then-write transaction in WAL mode fails at once (no busy wait)
        # when another process committed in between; taken up front, the busy timeout applies instead. A read
        # (TaskStore._reading) begins deferred: it reads a snapshot and never waits behind a writer.
        sa.event.listen(engine, "begin", lambda conn: conn.exec_driver_sql(
            "BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE"))
    else:
        # A server that drops packets fails the connection within the timeout instead of hanging it for minutes.
        engine = sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args(parsed))
    metadata.create_all(engine)
    make_revocations_table(engine)  # revoked_keys: the command line writes it too (flows.key_revocations)
    _migrate(engine)
    return engine


def _migrate(engine: sa.Engine) -> None:
    """Add the columns of ``_ADDED_COLUMNS`` and the indexes of ``_ADDED_INDEXES`` that a store made by an earlier
    version lacks (its rows get the default). One write transaction (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory
    lock), so replicas starting together add each once."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATE_LOCK})
        for index in (i for table in metadata.sorted_tables for i in table.indexes if i.name in _ADDED_INDEXES):
            conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))
        for table, names in _ADDED_COLUMNS.items():
            have = {column["name"] for column in sa.inspect(conn).get_columns(table.name)}
            for name in names:
                if name not in have:  # the column's DDL as the table declares it, in this database's dialect
                    ddl = sa.schema.CreateColumn(table.c[name]).compile(dialect=conn.dialect)
                    conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {ddl}")
