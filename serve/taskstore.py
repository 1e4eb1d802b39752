"""The task store: tasks (state, progress, results) and chats, in any SQLAlchemy database.

SQLite in WAL mode by default (``$TESSERA_HOME/tasks.db``), so the HTTP replica reads
while a task's Ray actor writes, each process with its own engine. State only moves
forward: every write to a task is conditional on the task being unfinished, so once a
cancel (or a failure) is committed, nothing a still-running worker writes lands, and a
task reaches exactly one final state.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import sqlalchemy as sa

UNFINISHED = ("queued", "running")
FINAL = ("finished", "failed", "cancelled")

metadata = sa.MetaData()

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
    sa.Column("result", sa.JSON),
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


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    connection.isolation_level = None  # transactions are begun below, not by the driver
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str) -> sa.Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout, and its folder created."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            from pathlib import Path

            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        # A write lock from the start: a read-then-write transaction in WAL mode fails at once (no busy wait)
        # when another process committed in between; taken up front, the busy timeout applies instead.
        sa.event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    else:
        engine = sa.create_engine(url, pool_pre_ping=True)
    metadata.create_all(engine)
    return engine


class TaskStore:
    """Tasks and chats of every key; reads take the owner, so one key never sees another's rows."""

    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)

    # -- tasks --------------------------------------------------------------------------

    def create_task(self, owner: str, flow: str, spec: dict[str, Any], queries: list[dict[str, str]],
                    steps: list[str], *, limit: int | None = None) -> str | None:
        """A new queued task's id; None when ``owner`` already has ``limit`` unfinished tasks.

        The count and the insert are one statement (``INSERT ... SELECT ... WHERE count < limit``), so two
        concurrent enqueues cannot both pass a check that only one of them may pass: SQLite runs it under
        the write lock that ``BEGIN IMMEDIATE`` takes; other databases run it at SERIALIZABLE isolation."""
        task_id, now = uuid.uuid4().hex, time.time()
        row = {"id": task_id, "owner": owner, "status": "queued", "flow": flow, "spec": spec, "queries": queries,
               "steps": steps, "created": now, "updated": now, "current_step": None, "steps_done": 0,
               "rows_done": 0, "step_progress": {s: {"status": "pending", "rows_in": 0, "rows_out": 0,
                                                     "seconds": 0.0} for s in steps},
               "log": [f"queued: flow '{flow}', {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}"],
               "error": None, "result": None}
        if limit is None:
            with self.engine.begin() as conn:
                conn.execute(tasks.insert().values(**row))
            return task_id
        active = (sa.select(sa.func.count()).select_from(tasks)
                  .where(tasks.c.owner == owner, tasks.c.status.in_(UNFINISHED)).scalar_subquery())
        values = sa.select(*[sa.literal(row[c.name], type_=c.type).label(c.name) for c in tasks.columns]
                           ).where(active < limit)
        with self._serializable() as conn:
            done = conn.execute(tasks.insert().from_select([c.name for c in tasks.columns], values))
        return task_id if done.rowcount == 1 else None

    def _serializable(self) -> Any:
        """A transaction whose reads and writes no concurrent one interleaves (SQLite's is, by BEGIN IMMEDIATE)."""
        if self.engine.dialect.name == "sqlite":
            return self.engine.begin()
        return self.engine.execution_options(isolation_level="SERIALIZABLE").begin()

    def task(self, task_id: str, owner: str | None) -> dict[str, Any] | None:
        """The task's row, or None when it does not exist or belongs to another owner (None: any owner)."""
        query = sa.select(tasks).where(tasks.c.id == task_id)
        if owner is not None:
            query = query.where(tasks.c.owner == owner)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def list_tasks(self, owner: str) -> list[dict[str, Any]]:
        columns = [tasks.c.id, tasks.c.status, tasks.c.flow, tasks.c.created, tasks.c.updated, tasks.c.steps_done,
                   tasks.c.error]
        query = sa.select(*columns).where(tasks.c.owner == owner).order_by(tasks.c.created)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def active_count(self, owner: str) -> int:
        query = sa.select(sa.func.count()).select_from(tasks).where(tasks.c.owner == owner,
                                                                    tasks.c.status.in_(UNFINISHED))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def unfinished(self) -> list[dict[str, Any]]:
        query = sa.select(tasks.c.id, tasks.c.status, tasks.c.created).where(tasks.c.status.in_(UNFINISHED))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def update(self, task_id: str, *, log: str | None = None, **values: Any) -> bool:
        """Write ``values`` (and append a log line) if the task is unfinished; False when it is not."""
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(tasks.c.status, tasks.c.log).where(tasks.c.id == task_id)).first()
            if row is None or row.status not in UNFINISHED:
                return False
            if log:
                values["log"] = [*row.log, log]
            values["updated"] = time.time()
            done = conn.execute(tasks.update().where(tasks.c.id == task_id, tasks.c.status.in_(UNFINISHED))
                                .values(**values))
            return done.rowcount == 1

    def finish(self, task_id: str, status: str, *, error: str | None = None, result: dict[str, Any] | None = None,
               log: str | None = None) -> bool:
        """Move an unfinished task to its final ``status``; False when it was final already (nothing changes).

        Steps that had not finished are marked with the final status, so ``steps_done`` always equals the steps
        marked ``done``."""
        if status not in FINAL:
            raise ValueError(f"[Internal] '{status}' is not a final status")
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(tasks.c.status, tasks.c.step_progress, tasks.c.log)
                               .where(tasks.c.id == task_id)).first()
            if row is None or row.status not in UNFINISHED:
                return False
            closed = "interrupted" if status != "finished" else "done"
            progress = {step: (info if info["status"] == "done" else {**info, "status": closed})
                        for step, info in row.step_progress.items()}
            line = log or (f"{status}: {error}" if error else status)
            done = conn.execute(tasks.update().where(tasks.c.id == task_id, tasks.c.status.in_(UNFINISHED)).values(
                status=status, error=error, result=result, step_progress=progress, log=[*row.log, line],
                steps_done=sum(1 for info in progress.values() if info["status"] == "done"),
                updated=time.time()))
            return done.rowcount == 1

    def status_counts(self, owner: str | None = None) -> dict[str, int]:
        query = sa.select(tasks.c.status, sa.func.count()).group_by(tasks.c.status)
        if owner is not None:
            query = query.where(tasks.c.owner == owner)
        with self.engine.connect() as conn:
            return {status: int(n) for status, n in conn.execute(query)}

    # -- chats --------------------------------------------------------------------------

    def create_chat(self, owner: str, task_id: str, model: str, column: str) -> str:
        chat_id = uuid.uuid4().hex
        with self.engine.begin() as conn:
            conn.execute(chats.insert().values(id=chat_id, owner=owner, task_id=task_id, model=model, column=column,
                                               messages=[], created=time.time()))
        return chat_id

    def chat(self, chat_id: str, owner: str) -> dict[str, Any] | None:
        query = sa.select(chats).where(chats.c.id == chat_id, chats.c.owner == owner)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def add_messages(self, chat_id: str, messages: list[dict[str, Any]]) -> None:
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(chats.c.messages).where(chats.c.id == chat_id)).first()
            conn.execute(chats.update().where(chats.c.id == chat_id).values(messages=[*row.messages, *messages]))
