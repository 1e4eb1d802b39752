"""The task store's rows of the indices the service made, and the transactions that queue work on an index.

Why a module of its own: who owns an index, whether an ingestion or a compaction of it runs, and the one
serializable transaction that checks that and queues the next (``create_ingest_task``, ``create_compact_task``,
``forget_index``) change for other reasons than the tasks' and chats' reads and writes. ``TaskStore``
(``serve.tasks.taskstore``) inherits them from ``IndexRows``. ``insert_within``, the limits' check, is here too: the
queueings here and ``TaskStore.create_task`` both insert a task by it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

import sqlalchemy as sa

from serve.tasks.task_rows import FINAL, UNFINISHED, task_row
from serve.tasks.taskstore_db import chats, indices, tasks

#: ``create_ingest_task``'s ``seen`` when the caller checked no row: queue into whatever row there is.
ANY_ROW = object()


class IndexRows:
    """The indices ``TaskStore`` holds (its ``engine``, ``_reading`` and ``_serializable`` are the store's)."""

    def index(self, name: str) -> dict[str, Any] | None:
        with self._reading() as conn:
            row = conn.execute(sa.select(indices).where(indices.c.name == name)).mappings().first()
        return dict(row) if row else None

    def share_index(self, name: str, owner: str, shared: bool, on_change: Any = None) -> bool:
        """Make ``owner``'s index ``name`` searchable by every key (``shared``) or by ``owner`` only; False when
        ``owner`` has no index of that name. ``on_change(row)`` runs inside the transaction with the changed row
        (the index's owner file is written there), so concurrent changes reach it in the order they commit."""
        with self.engine.begin() as conn:
            done = conn.execute(indices.update().where(indices.c.name == name, indices.c.owner == owner)
                                .values(shared=shared))
            if done.rowcount != 1:
                return False
            if on_change is not None:
                on_change(dict(conn.execute(sa.select(indices).where(indices.c.name == name)).mappings().one()))
            return True

    def restore_index(self, row: dict[str, Any]) -> bool:
        """Put back the row of an index the service made (read from its owner file) unless it has one; whether it
        was put back."""
        try:
            with self._serializable() as conn:
                if conn.execute(sa.select(indices.c.name).where(indices.c.name == row["name"])).first() is not None:
                    return False
                conn.execute(indices.insert().values(name=row["name"], owner=row["owner"], spec=row["spec"],
                                                     created=row["created"], ingest_task=None, shared=row["shared"]))
        except sa.exc.IntegrityError:  # another replica put it back first
            return False
        return True

    def indices_made(self, names: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """Every index the service made, by name: its row (owner, spec, created, ingest_task, shared); with
        ``names``, those of them only (a search reads the rows of the indices it names, not every row)."""
        query = sa.select(indices)
        if names is not None:
            if not names:
                return {}
            query = query.where(indices.c.name.in_(sorted(names)))
        with self._reading() as conn:
            return {r["name"]: dict(r) for r in conn.execute(query).mappings()}

    def create_ingest_task(self, owner: str, name: str, spec_name: str, job: dict[str, Any], steps: list[str], *,
                           limit: int, total: int | None = None, task_id: str | None = None,
                           seen: Any = ANY_ROW, on_row: Callable[[dict[str, Any]], None] | None = None
                           ) -> tuple[str | None, str]:
        """A queued ingestion of ``job`` into the index ``name``, made for ``owner`` if it is new: ``(task id,
        "ok")``, or ``(None, why)`` with why ``"owner"`` (another key made it), ``"busy:<task id>"`` (an
        ingestion into it is unfinished), ``"changed"`` (``seen``, the ``created`` of the index's row when the
        upload was checked, None for no row, is not its row now: it was deleted or made meanwhile), ``"limit"``
        (``owner`` has ``limit`` unfinished tasks) or ``"max_tasks"`` (the store has ``total``).

        One serializable transaction, so two uploads into one index never run at once, and an index has one
        owner however many replicas race to make it. ``on_row(row)`` runs inside it with the index's row as it will
        be (its owner file is written there): where it raises, nothing is queued or made."""
        row = task_row(owner, f"ingest:{name}", job, [], steps,
                       f"queued: ingest {job['documents']} document(s) into index '{name}'", task_id)
        with self._serializable() as conn:
            index = conn.execute(sa.select(indices).where(indices.c.name == name)).first()
            why = _claim_refused(conn, index, owner)
            if why is not None:
                return None, why
            if seen is not ANY_ROW and (index.created if index is not None else None) != seen:
                return None, "changed"
            if why := insert_within(conn, row, limit, total):
                return None, why
            if index is None:
                conn.execute(indices.insert().values(name=name, owner=owner, spec=spec_name, created=time.time(),
                                                     ingest_task=row["id"]))
            else:
                conn.execute(indices.update().where(indices.c.name == name).values(ingest_task=row["id"]))
            if on_row is not None:
                on_row(dict(conn.execute(sa.select(indices).where(indices.c.name == name)).mappings().one()))
        return row["id"], "ok"

    def create_compact_task(self, owner: str, name: str, job: dict[str, Any], steps: list[str], *, limit: int,
                            total: int | None = None, task_id: str | None = None) -> tuple[str | None, str]:
        """A queued compaction of the index ``name`` for ``owner`` (an admin key, not necessarily the index's):
        ``(task id, "ok")``, or ``(None, why)`` with why ``"busy:<task id>"`` (an ingestion into it is unfinished: its
        commit would make the merge redo itself), ``"compacting:<task id>"`` (a compaction of it is unfinished) or
        ``"limit"`` or ``"max_tasks"``, as for an ingestion. One serializable transaction, so two compactions of one
        index never run at once."""
        row = task_row(owner, compaction_flow(name), job, [], steps, f"queued: compact index '{name}'", task_id)
        with self._serializable() as conn:
            busy = _ingestion_running(conn, conn.execute(sa.select(indices).where(indices.c.name == name)).first())
            if busy is not None:
                return None, busy
            running = _compaction_running(conn, name)
            if running is not None:
                return None, f"compacting:{running}"
            if why := insert_within(conn, row, limit, total):
                return None, why
        return row["id"], "ok"

    def forget_index(self, name: str, owner: str, latest: str | None = None,
                     before: Callable[[], bool] | None = None, ingestions: bool = False) -> str:
        """Remove the record of index ``name``: ``"ok"``, or why not (``"owner"``, ``"busy:<id>"``, as for an upload,
        also while a compaction of it is unfinished: it would write its shards into a folder gone; ``"latest"``:
        ``latest`` is not its last ingestion; ``"kept"``: ``before()`` said no), in one transaction. With
        ``ingestions`` (a user's delete of the index, not a failed first upload's undoing), the owner's ended
        ingestion tasks of the index and their chats go too: the latest could not be deleted while the index read
        it, and each stayed for the retention's days, an upload of an index that no longer is."""
        with self._serializable() as conn:
            index = conn.execute(sa.select(indices).where(indices.c.name == name)).first()
            why = _claim_refused(conn, index, owner)
            if why is None and (compacting := _compaction_running(conn, name)) is not None:
                why = f"busy:{compacting}"
            if why is None and latest is not None and (index is None or index.ingest_task != latest):
                why = "latest"
            why = why or (None if before is None or before() else "kept")  # last: it moves the folder away
            if why is None and index is not None:
                conn.execute(indices.delete().where(indices.c.name == name))
                if ingestions:
                    ended = sa.select(tasks.c.id).where(tasks.c.owner == index.owner, tasks.c.flow == f"ingest:{name}",
                                                        tasks.c.status.in_(FINAL))
                    conn.execute(chats.delete().where(chats.c.task_id.in_(ended)))
                    conn.execute(tasks.delete().where(tasks.c.id.in_(ended)))
        return why or "ok"


def _claim_refused(conn: Any, index: Any, owner: str) -> str | None:
    """Why ``owner`` may not change the index row ``index`` now (None: it may, or there is no row)."""
    if index is None:
        return None
    if index.owner != owner:
        return "owner"
    return _ingestion_running(conn, index)


def _ingestion_running(conn: Any, index: Any) -> str | None:
    """``"busy:<task id>"`` while the last ingestion into the index row ``index`` is unfinished, else None."""
    if index is None or not index.ingest_task:
        return None
    status = conn.execute(sa.select(tasks.c.status).where(tasks.c.id == index.ingest_task)).scalar()
    return f"busy:{index.ingest_task}" if status in UNFINISHED else None


def compaction_flow(name: str) -> str:
    """The ``flow`` of a compaction task of the index ``name`` (an upload's is ``ingest:<name>``)."""
    return f"compact:{name}"


def _compaction_running(conn: Any, name: str) -> str | None:
    """The id of an unfinished compaction task of the index ``name``, None when there is none (a few unfinished
    tasks at most: the status index finds them)."""
    return conn.execute(sa.select(tasks.c.id).where(tasks.c.status.in_(UNFINISHED),
                                                    tasks.c.flow == compaction_flow(name)).limit(1)).scalar()
def insert_within(conn: Any, row: dict[str, Any], limit: int, total: int | None = None) -> str | None:
    """Insert the task ``row`` unless its owner has ``limit`` unfinished tasks (``"limit"``) or the store has ``total``
    of every key's (``"max_tasks"``); None when it was inserted.

    The counts and the insert are one statement (``INSERT ... SELECT ... WHERE count < limit``), so two
    concurrent enqueues cannot both pass a check that only one of them may pass: it runs in ``_serializable``."""
    unfinished = tasks.c.status.in_(UNFINISHED)
    mine = sa.select(sa.func.count()).select_from(tasks).where(tasks.c.owner == row["owner"], unfinished)
    values = sa.select(*[sa.literal(value, type_=tasks.c[name].type).label(name) for name, value in row.items()]
                       ).where(mine.scalar_subquery() < limit)
    if total is not None:
        values = values.where(sa.select(sa.func.count()).select_from(tasks).where(unfinished).scalar_subquery() < total)
    inserted = tasks.insert().from_select(list(row), values).returning(tasks.c.id)
    if conn.execute(inserted).first() is not None:  # (psycopg's rowcount of an INSERT ... SELECT is -1)
        return None
    return "limit" if conn.execute(mine).scalar() >= limit else "max_tasks"
