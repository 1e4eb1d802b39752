"""The task store: tasks (state, progress, results), chats, and the indices the service made, in any
SQLAlchemy database.

SQLite in WAL mode by default (``$TESSERA_HOME/tasks.db``), so the HTTP replica reads
while a task's Ray actor writes, each process with its own engine. State only moves
forward: every write to a task is conditional on the task being unfinished, so once a
cancel (or a failure) is committed, nothing a still-running worker writes lands, and a
task reaches exactly one final state.

The rows of the indices the service made, and the transactions that queue an ingestion or a compaction of one,
are ``serve.tasks.taskstore_indices``; the statuses (``UNFINISHED``, ``FINAL``) are ``serve.tasks.task_rows``.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Collection, Iterator
from typing import Any

import sqlalchemy as sa

from flows.task_store_check import driver_error, refused_words, shown_url
from operators.errors import SpecError
from serve.http.server_paths import without_server_paths
from serve.tasks.task_rows import FINAL, UNFINISHED, task_row
from serve.tasks.taskstore_db import READ_ONLY, chats, indices, make_engine, metadata, tasks
from serve.tasks.taskstore_indices import ANY_ROW, IndexRows, compaction_flow, insert_within  # noqa: F401 (re-exported)

__all__ = ["FINAL", "UNFINISHED", "TaskStore", "TaskStoreError", "TasksAtLimit", "chats", "driver_error", "indices",
           "make_engine", "metadata", "shown_url", "tasks"]

_log = logging.getLogger("tessera.serve")

#: The PostgreSQL advisory lock that serializes the transactions that check then write (``TaskStore._serializable``).
_PG_WRITE_LOCK = 0x7E55E7A


class TaskStoreError(SpecError):
    """The task store cannot be opened or made (``args.service.task_store``): a config error, named in one line."""


class TasksAtLimit(Exception):
    """A task refused by ``create_task``'s limits: ``why`` is ``"limit"`` (its key's) or ``"max_tasks"`` (all's)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class TaskStore(IndexRows):
    """Tasks and chats of every key; reads take the owner, so one key never sees another's rows."""

    def __init__(self, url: str):
        self.url = url
        try:
            self.engine = make_engine(url)
        except (OSError, ImportError, sa.exc.SQLAlchemyError) as err:  # a folder that is a file, no driver, server down
            refused = refused_words(err)  # a full disk: say so, not a bare "disk I/O error"
            said = f": {refused}" if refused else f" ({driver_error(err)})"
            raise TaskStoreError(f"the task store {shown_url(url)} cannot be opened{said}",
                                 field="task_store") from None

    # -- tasks --------------------------------------------------------------------------

    def create_task(self, owner: str, flow: str, spec: dict[str, Any], queries: list[dict[str, str]],
                    steps: list[str], *, limit: int | None = None, total: int | None = None,
                    task_id: str | None = None) -> str:
        """A new queued task's id (``task_id`` if given: a spare worker's, ``serve.tasks.spare``); ``TasksAtLimit`` when
        ``owner`` already has ``limit`` unfinished tasks or the store ``total`` (``_insert_within``)."""
        row = task_row(owner, flow, spec, queries, steps,
                       f"queued: flow '{flow}', {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}", task_id)
        if limit is None:
            with self.engine.begin() as conn:
                conn.execute(tasks.insert().values(**row))
            return row["id"]
        with self._serializable() as conn:
            why = insert_within(conn, row, limit, total)
        if why:
            raise TasksAtLimit(why)
        return row["id"]

    @contextlib.contextmanager
    def _serializable(self) -> Iterator[Any]:
        """A transaction whose reads and writes no other such transaction interleaves: SQLite's, by BEGIN IMMEDIATE;
        PostgreSQL's, by a transaction-level advisory lock (SERIALIZABLE isolation would refuse one of two racing
        enqueues with a serialization failure to retry); other databases' at SERIALIZABLE."""
        if self.engine.dialect.name == "postgresql":
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_WRITE_LOCK})
                yield conn
        elif self.engine.dialect.name == "sqlite":
            with self.engine.begin() as conn:
                yield conn
        else:
            with self.engine.execution_options(isolation_level="SERIALIZABLE").begin() as conn:
                yield conn

    def _reading(self) -> Any:
        """A connection for reads only: on SQLite it takes no write lock, so a read never waits behind a writer."""
        return self.engine.execution_options(**{READ_ONLY: True}).connect()

    def task(self, task_id: str, owner: str | None) -> dict[str, Any] | None:
        """The task's row, or None when it does not exist or belongs to another owner (None: any owner)."""
        query = sa.select(tasks).where(tasks.c.id == task_id)
        if owner is not None:
            query = query.where(tasks.c.owner == owner)
        with self._reading() as conn:
            row = conn.execute(query).mappings().first()
        return _with_result(dict(row)) if row else None

    def list_tasks(self, owner: str, *, limit: int | None = None, before: tuple[float, str] | None = None,
                   status: str | None = None, shown_failed: Collection[str] = ()) -> list[dict[str, Any]]:
        """``owner``'s tasks newest first (by ``created``, then ``id``: equal times keep one order), at most
        ``limit``, those after the ``(created, id)`` of ``before`` only, of one ``status``: the ``shown_failed``
        tasks (unfinished here, their failure kept until the store takes it: ``serve.tasks.unstored``) as failed. A
        range read of the index (owner, created, id): a page costs its own rows, however many tasks the owner keeps.
        ``steps_total``: the steps its row holds (no spec is read again), as ``/task/progress`` counts them."""
        columns = [tasks.c.id, tasks.c.status, tasks.c.flow, tasks.c.created, tasks.c.updated, tasks.c.steps_done,
                   tasks.c.steps, tasks.c.error]
        query = (sa.select(*columns).where(tasks.c.owner == owner)
                 .order_by(tasks.c.created.desc(), tasks.c.id.desc()).limit(limit))
        if before is not None:
            created, task_id = before  # ``created <=`` first: the index's range; the rest breaks ties by id
            query = query.where(tasks.c.created <= created, sa.or_(
                tasks.c.created < created, sa.and_(tasks.c.created == created, tasks.c.id < task_id)))
        if status == "failed" and shown_failed:
            query = query.where(sa.or_(tasks.c.status == status, tasks.c.id.in_(list(shown_failed))))
        elif status is not None:
            query = query.where(tasks.c.status == status)
            if shown_failed and status in UNFINISHED:
                query = query.where(tasks.c.id.notin_(list(shown_failed)))
        with self._reading() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
        for row in rows:
            row["steps_total"] = len(row.pop("steps"))
        return rows

    def unfinished(self) -> list[dict[str, Any]]:
        query = sa.select(tasks.c.id, tasks.c.status, tasks.c.created).where(tasks.c.status.in_(UNFINISHED))
        with self._reading() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def update(self, task_id: str, *, log: str | None = None, **values: Any) -> bool:
        """Write ``values`` (and append a log line) if the task is unfinished; False when it is not."""
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(tasks.c.status, tasks.c.log).where(tasks.c.id == task_id)
                               .with_for_update()).first()  # PostgreSQL: two appends to the log wait their turn
            if row is None or row.status not in UNFINISHED:
                return False
            if log:  # a client reads the log: a step's message worded without the server's paths
                values["log"] = [*row.log, without_server_paths(log)]
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
        if error:  # the server's log keeps the failure as it was; the task, which clients read, without server paths
            _log.warning("task %s %s: %s", task_id, status, error)
            error = without_server_paths(error)
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(tasks.c.status, tasks.c.step_progress, tasks.c.log)
                               .where(tasks.c.id == task_id).with_for_update()).first()
            if row is None or row.status not in UNFINISHED:
                return False
            closed = "interrupted" if status != "finished" else "done"
            progress = {step: (info if info["status"] == "done" else {**info, "status": closed})
                        for step, info in row.step_progress.items()}
            line = without_server_paths(log) if log else f"{status}: {error}" if error else status
            done = conn.execute(tasks.update().where(tasks.c.id == task_id, tasks.c.status.in_(UNFINISHED)).values(
                status=status, error=error, result_z=result, step_progress=progress, log=[*row.log, line],
                steps_done=sum(1 for info in progress.values() if info["status"] == "done"),
                updated=time.time()))
            return done.rowcount == 1

    def status_counts(self, owner: str | None = None) -> dict[str, int]:
        query = sa.select(tasks.c.status, sa.func.count()).group_by(tasks.c.status)
        if owner is not None:
            query = query.where(tasks.c.owner == owner)
        with self._reading() as conn:
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
        with self._reading() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def task_chats(self, task_id: str, owner: str) -> list[dict[str, Any]]:
        """The owner's chats about one task, oldest first, each with its messages."""
        query = (sa.select(chats).where(chats.c.task_id == task_id, chats.c.owner == owner)
                 .order_by(chats.c.created, chats.c.id))
        with self._reading() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def add_messages(self, chat_id: str, messages: list[dict[str, Any]], *, after: int | None = None) -> bool:
        """Append ``messages`` to the chat; False when it is gone (deleted with its task while its answer was
        written: ``DELETE /task/{id}``, retention). ``after``: the number of messages the answer was asked with; a
        chat that holds another number now (a message beside it was kept first) raises ``ChatMoved``."""
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(chats.c.messages).where(chats.c.id == chat_id).with_for_update()).first()
            if row is None:
                return False
            if after is not None and len(row.messages) != after:
                raise ChatMoved(len(row.messages) - after)
            conn.execute(chats.update().where(chats.c.id == chat_id).values(messages=[*row.messages, *messages]))
        return True


class ChatMoved(Exception):
    """A chat's messages changed while an answer was written: it was asked without them (``add_messages``)."""


def _with_result(row: dict[str, Any]) -> dict[str, Any]:
    """A task row as the callers read it: ``result`` from ``result_z`` (compressed, written since), else from the
    JSON ``result`` of a row an earlier version wrote (kept as it was, not rewritten)."""
    compressed = row.pop("result_z", None)
    if compressed is not None:
        row["result"] = compressed
    return row
