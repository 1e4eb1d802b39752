"""The failure ledger, ``<index>/failures.jsonl``: documents that did not make it into the index.

A document fails when its record cannot be read (``stage: read``: a JSONL line that is not
JSON or has no text field, a bad CSV row, a file that cannot be read at all; see
``flows.ingestion.records``), or chunking or the encoder raises for it even on its own (``chunk``/``embed``;
a failing batch is retried one document at a time first). Such a document is left out
of its shard whole (no chunk without a vector reaches the index) and recorded here
with the raw line or the document row, the stage and the error, so ``--retry-failed``
can process exactly those documents again.

The file is append-only JSON lines, written by the driver only:

* ``{"event": "failure", "id", "shard", "attempt", "stage", "error", ...}``: one failed
  document (``id`` is ``doc:<doc_id>``, ``read:<path>:<line>``, or ``read:<path>`` for a file);
* ``{"event": "attempt", "shard", "attempt", "failures", "empty"}``: closes the failures
  of one attempt at a shard. They are appended in one write, just before the shard's
  manifest commit and under its lock (``Index.commit``'s ``before_write``), by the ingest
  whose commit records the shard: of two ingests of one source, the other writes nothing;
  lines of an attempt without its closing line (a crash mid-write)
  are ignored. A shard with no row left to write (every document failed) cannot be a
  shard folder; its attempt line says ``"empty": true`` and counts as its commit (written
  under the same lock, unless the shard is finished already: ``job._Run._record_empty``);
* ``{"event": "retry", "shard", "ids"}``: ``--retry-failed`` is about to process these
  failures into the new shard ``shard``; or another source (other fields) has read their files
  into its finished shard ``shard`` without failing on them (``supersede_read_failures``).

A shard may be attempted more than once (a crash between the ledger write and the
commit); only its latest closed attempt counts, and only once the shard is finished
(in the manifest, or empty), so the ledger always describes exactly the committed
index. A failure is resolved once a finished retry shard took it in and did not fail
it again; no separate "resolved" write is needed, so a crash between a retry's commit
and anything after it loses nothing.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

LEDGER_FILE = "failures.jsonl"
log = logging.getLogger("tessera.ingest")
#: Characters of an unreadable line the ledger keeps (``raw``): a retry reads the line from its file, and a 30 MB
#: line kept whole made each retry that failed it again add 30 MB to the ledger.
RAW_CHARS = 10_000
#: (ledger, line) pairs already said to be unreadable, in this process.
_WARNED: set[tuple[str, int]] = set()


def absolute(path: str) -> str:
    """A source file's path as the ledger records it: absolute (``~`` expanded, links kept)."""
    return os.path.abspath(os.path.expanduser(path))


@dataclass
class Failure:
    """One document that is not in the index, and why."""

    id: str
    stage: str                          # read | chunk | embed
    error: str
    doc_id: str | None = None
    record: dict[str, Any] | None = None  # the document row (chunk/embed failures)
    path: str | None = None             # read failures: file and 1-based line, raw line text
    line: int | None = None
    raw: str | None = None
    raw_chars: int | None = None        # the line's length where ``raw`` holds its first RAW_CHARS characters only
    shard: str | None = None

    @classmethod
    def of_document(cls, stage: str, record: dict[str, Any], error: str) -> "Failure":
        doc_id = str(record.get("doc_id") or record.get("docno"))
        return cls(id=f"doc:{doc_id}", stage=stage, error=error, doc_id=doc_id, record=record)

    @classmethod
    def of_line(cls, path: str, line: int, raw: bytes, error: str) -> "Failure":
        path = absolute(path)  # so --retry-failed finds the file from any directory
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        return cls(id=f"read:{path}:{line}", stage="read", error=error, path=path, line=line, raw=text[:RAW_CHARS],
                   raw_chars=len(text) if len(text) > RAW_CHARS else None)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def described(self) -> str:
        """``where: why`` as a person reads it: the file and line (or the id) and the error, said once."""
        from operators.errors import shown_name

        path = shown_name(self.path) if self.path else self.path
        where = path if self.line is None else f"{path}, line {self.line}"
        return f"{where or self.id}: {self.error.removeprefix(f'{path}: ') if path else self.error}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Failure":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})


@dataclass
class _State:
    latest: dict[str, tuple[str, bool]] = field(default_factory=dict)  # shard -> (latest attempt, empty)
    failures: dict[tuple[str, str], list[tuple[int, Failure]]] = field(default_factory=dict)
    retries: list[tuple[int, str, list[str]]] = field(default_factory=list)  # (position, shard, ids)

    def failed_ids(self, shard: str) -> set[str]:
        attempt = self.latest.get(shard)
        return set() if attempt is None else {f.id for _, f in self.failures.get((shard, attempt[0]), [])}

    def open_failures(self, finished: set[str]) -> list[Failure]:
        """Failures of finished shards' latest attempts that no finished retry has resolved (one per id)."""
        finished = finished | {s for s, (_, empty) in self.latest.items() if empty}
        resolved: dict[str, int] = {}  # id -> position of the last retry that resolved it
        for position, shard, ids in self.retries:
            if shard in finished:
                again = self.failed_ids(shard)
                for failure_id in ids:
                    if failure_id not in again:
                        resolved[failure_id] = position
        found: dict[str, tuple[int, Failure]] = {}
        for shard, (attempt, _) in self.latest.items():
            if shard not in finished:
                continue
            for position, failure in self.failures.get((shard, attempt), []):
                if position > resolved.get(failure.id, -1):
                    if failure.id not in found or found[failure.id][0] < position:
                        found[failure.id] = (position, failure)
        return [failure for _, failure in sorted(found.values(), key=lambda item: item[0])]


class Ledger:
    """Reads and appends ``<index>/failures.jsonl`` (driver side only)."""

    def __init__(self, index_path: str | Path):
        self.path = Path(index_path) / LEDGER_FILE

    def record_attempt(self, shard: str, failures: list[Failure], *, empty: bool = False) -> None:
        """Append one attempt at ``shard`` with its failures (maybe none), in one write."""
        attempt = uuid.uuid4().hex[:12]
        now = round(time.time(), 3)
        lines = [{"event": "failure", **f.to_dict(), "shard": shard, "attempt": attempt, "time": now}
                 for f in failures]
        lines.append({"event": "attempt", "shard": shard, "attempt": attempt, "failures": len(failures),
                      "empty": empty, "time": now})
        self._append(lines)

    def record_retry(self, shard: str, ids: list[str]) -> None:
        """Announce that ``shard`` will hold the retried failures ``ids``."""
        self._append([{"event": "retry", "shard": shard, "ids": ids, "time": round(time.time(), 3)}])

    def _append(self, lines: list[dict[str, Any]]) -> None:
        data = "".join(_json_line(line) for line in lines).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a line cut short by a crash: ended here, or this
                data = b"\n" + data  # write's first line was read as part of it, and lost with it
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _events(self) -> Iterator[tuple[int, dict[str, Any]]]:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for position, raw in enumerate(f):
                try:
                    event = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    event = None
                if isinstance(event, dict):
                    yield position, event
                elif raw.strip():  # a line cut short by a crash (its attempt has no closing line either), or damage
                    self._unreadable(position + 1)

    def _unreadable(self, line: int) -> None:
        """Say, once per line, that a line is not an event: the failures of its attempt are not counted."""
        if (str(self.path), line) in _WARNED:
            return
        _WARNED.add((str(self.path), line))
        log.warning("%s line %d is not a ledger event (cut short by a crash while it was written, or damaged): "
                    "it is left out, and with it the failures of its shard's attempt, which --retry-failed will "
                    "not retry (their documents are not in the index)", self.path, line)

    def _state(self) -> _State:
        state = _State()
        for position, event in self._events():
            kind = event.get("event")
            if kind == "failure":
                key = (event.get("shard"), event.get("attempt"))
                state.failures.setdefault(key, []).append((position, Failure.from_dict(event)))
            elif kind == "attempt":
                state.latest[event["shard"]] = (event["attempt"], bool(event.get("empty")))
            elif kind == "retry":
                state.retries.append((position, event["shard"], list(event.get("ids") or [])))
        return state

    def read_failure_ids(self, finished: set[str]) -> set[str]:
        """Ids of unreadable lines recorded by finished shards (resolved or not): staging skips them
        even once fixed, so the shards after them keep their documents (a fixed line enters by retry)."""
        return {f.id for f in self.read_failures(finished)}

    def read_failures(self, finished: set[str]) -> list[Failure]:
        """The unreadable lines and files recorded by finished shards (resolved or not), as ``read_failure_ids``."""
        state = self._state()
        return [f for shard, (attempt, _) in state.latest.items() if shard in finished
                for _, f in state.failures.get((shard, attempt), []) if f.stage == "read"]

    def supersede_read_failures(self, own: set[str], finished: set[str], files: set[str],
                                here: Callable[[Failure], str | None] = lambda f: None) -> list[str]:
        """Resolve the open read failures of other sources in ``files``, which the source of the finished shards
        ``own`` has read since without failing on them: a file that failed for want of its text column, read again
        with ``--text-field``, left its failure open, and a retry would read it as before. A failure's file that
        moved is in ``files`` where ``here`` finds it (``where_now``). Recorded as a retry of one of ``own``, which
        ``open_failures`` counts as resolving them; returns their ids."""
        return self._resolve(own, finished, lambda f: f.stage == "read" and f.shard not in own and (
            f.path in files or here(f) in files))

    def resolve_retired(self, retired: set[str], own: set[str], finished: set[str]) -> list[str]:
        """Resolve the open failures of the shards a sync ``retired`` that the source's current shards ``own`` did not
        fail on again (a line fixed since, a file removed), as ``supersede_read_failures`` does; their ids."""
        return self._resolve(own, finished, lambda f: f.shard in retired)

    def _resolve(self, own: set[str], finished: set[str], which: Callable[[Failure], bool]) -> list[str]:
        """Resolve the open failures ``which`` picks that none of the shards ``own`` failed on again."""
        state = self._state()
        again = set().union(*(state.failed_ids(shard) for shard in own))
        ids = [f.id for f in state.open_failures(finished) if which(f) and f.id not in again]
        if ids and own:
            self.record_retry(min(own), ids)
        return ids if own else []

    def failed_ids(self, shard: str) -> set[str]:
        """Ids of the failures of ``shard``'s latest closed attempt."""
        return self._state().failed_ids(shard)

    def empty_shards(self) -> set[str]:
        """Shards finished without a shard folder: every document of them failed."""
        return {shard for shard, (_, empty) in self._state().latest.items() if empty}

    def open_failures(self, finished: set[str]) -> list[Failure]:
        """Failures of finished shards' latest attempts that no finished retry has resolved (one per id)."""
        return self._state().open_failures(finished)


def open_failures_at(index_path: str | Path) -> list[Failure]:
    """The open failures of the index at ``index_path`` as its ledger holds them after a run (none without a
    ledger); an ``IndexStoreError`` where no index opens there."""
    from operators.store import Index

    ledger = Ledger(index_path)
    if not ledger.path.is_file():
        return []
    return ledger.open_failures(finished_shards(Index.open(index_path, verify=False), ledger))


def first_open_failure(index_path: str | Path) -> str | None:
    """The first open failure's error in the index's ledger, on one line (None: none there, or no index): when every
    document failed, the why belongs on the error itself, not only in the warnings before it and the file."""
    from operators.errors import one_line
    from operators.store import IndexStoreError

    try:
        failures = open_failures_at(index_path)
    except IndexStoreError:
        return None
    return one_line(failures[0].described()) if failures else None


def finished_shards(index, ledger: Ledger | None = None) -> set[str]:
    """The shards that are finished: committed (in the manifest of ``index``, None while it has none) or recorded
    empty in the ledger (every document of them failed, so there is no shard folder to commit). Staging, the
    commit of an empty shard, a run's undo and the pending report all mean these by a finished shard."""
    committed = index.finished_shards() if index is not None else set()
    return committed | (ledger if ledger is not None else Ledger(index.path)).empty_shards()


def _json_line(event: dict[str, Any]) -> str:
    """``event`` as a line of UTF-8 JSON; one holding a file name that is not UTF-8 (read by Python with a surrogate
    for each such byte) is escaped as ASCII, read back as the same name: written as it was, it stopped the ingest of
    the folder's every other file, on every run."""
    text = json.dumps(event, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(event, default=str)
    return text + "\n"
