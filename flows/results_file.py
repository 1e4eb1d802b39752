"""Writing a flow's result table (``tessera run --out``, ``write_results``): Parquet, JSON lines, CSV or a TREC
run, by suffix, checked before the run and written atomically."""

from __future__ import annotations

import errno
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from operators.atomic import replacing
from operators.disk_refusal import refusal, where
from operators.errors import SpecError, one_line

if TYPE_CHECKING:
    from flows.trec_run import TrecRows

RESULT_SUFFIXES = (".parquet", ".jsonl", ".csv", ".trec", ".run")
TREC_SUFFIXES = (".trec", ".run")


def check_result_path(path: str | Path) -> Path:
    """The output file, checked before a run: a known suffix, and a folder that exists (or can be made) and
    where this process can create a file (it makes and removes one in the folder, or in the nearest one that
    exists: permission bits do not tell, for root or in ``/proc``); a run's results are never computed to be
    thrown away."""
    path = Path(path)
    if _is_folder(path):  # `--out .` or `--out /tmp`: a folder, not a file whose name ('', 'tmp') lacks a suffix
        raise SpecError(f"cannot write {path}: it is a folder; give a file in it, such as "
                        f"{path / 'results.parquet'}", field="out")
    if path.suffix.lower() not in RESULT_SUFFIXES:
        raise SpecError(f"cannot write '{path.name}': the output file must end in {', '.join(RESULT_SUFFIXES)}",
                        field="out")
    try:
        _check_folder(_target(path))
    except OSError as err:  # a name too long, a loop of links: what the filesystem says, in one line
        raise SpecError(f"cannot write --out {path}: {err.strerror or err}", field="out") from None
    return path


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder; a name too long to be one is not (``_check_folder`` says what is wrong)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _target(path: Path) -> Path:
    """The file that writing ``path`` replaces: a link's target (also one not made yet), so that the rename into
    place replaces the target, not the link; a loop of links is the filesystem's error (``ELOOP``)."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as err:  # no file there yet, or a link to one not made yet: _check_folder says what is wrong
        if err.errno == errno.ELOOP:
            raise
        return Path(os.path.realpath(path))


def _check_folder(path: Path) -> None:
    if path.is_dir():
        raise SpecError(f"cannot write {path}: it is a folder", field="out")
    folder = path.parent
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise SpecError(f"cannot write {path}: {existing} is a file, not a folder", field="out")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise SpecError(f"cannot write {path}: no permission to write in {existing}", field="out")
    if existing is not None:  # the folder, or the one its missing folders would be made in
        probe = existing / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.probe"
        probe.touch(exist_ok=False)
        probe.unlink()


def write_results(table: pa.Table, path: str | Path, *, tag: str = "tessera") -> Path:
    """Write a results table as Parquet, JSON lines, CSV or a TREC run (``.trec``/``.run``, ``trec_run``,
    whose last column is ``tag``), by suffix, atomically: under a temporary name of this process's own, renamed
    into place when whole, removed on an error or Ctrl-C (two runs writing the same file: the last one wins). A
    ``path`` that is a link is written through: its target is replaced (the temporary file beside it), the link
    stays.

    CSV has no nested types: list and struct columns are written as JSON text. A file that cannot be written is
    a ``SpecError`` naming ``--out``.
    """
    return write_counted(table, path, tag=tag)[0]


def write_counted(table: pa.Table, path: str | Path, *, tag: str = "tessera") -> tuple[Path, int]:
    """``write_results``, and the rows the file holds: a TREC run's lines (a document's passages are one line), else
    the table's rows."""
    if not isinstance(table, pa.Table):  # a FlowResult (its .table), None: a bare AttributeError before
        hint = ": give its .table" if hasattr(table, "table") and isinstance(table.table, pa.Table) else ""
        raise SpecError(f"write_results writes a pyarrow Table, got {type(table).__name__}{hint}", field="table")
    path = check_result_path(path)
    suffix = path.suffix.lower()
    from flows.trec_run import trec_rows

    trec = trec_rows(table, tag) if suffix in TREC_SUFFIXES else None  # refused before anything is written
    try:
        target = _target(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as tmp:
            _write(table, tmp, suffix, trec)
    except OSError as err:
        if said := refusal(err):  # a full disk: pyarrow's "Error writing bytes to file. Detail: [errno 28] ..."
            raise SpecError(f"cannot write --out {path}: {said} ({where(target.parent)}); nothing was written there: "
                            "free space, or give --out on another disk, and run again", field="out") from None
        raise SpecError(f"cannot write --out {path}: {err.strerror or one_line(err, 160)}", field="out") from None
    return path, table.num_rows if trec is None else len(trec.qids)


def _write(table: pa.Table, tmp: Path, suffix: str, trec: TrecRows | None) -> None:
    if trec is not None:
        with open(tmp, "wb") as f:
            trec.write(f)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)
    elif suffix == ".jsonl":
        with open(tmp, "w", encoding="utf-8") as f:
            for batch in table.to_batches(max_chunksize=256):  # not every row as Python objects at once
                f.writelines(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in batch.to_pylist())
    else:
        import pyarrow.csv as pacsv

        flat = table
        for i, field in enumerate(table.schema):
            if pa.types.is_nested(field.type):
                values = [None if v is None else json.dumps(v, default=str) for v in table.column(i).to_pylist()]
                flat = flat.set_column(i, field.name, pa.array(values, pa.string()))
        pacsv.write_csv(flat, tmp)
