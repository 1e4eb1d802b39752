"""Paths a cluster can share: a local (or mounted) path, or a pyarrow filesystem URI.

A job's driver may run on any node, so its inputs and outputs can live on storage that every
node reaches: ``file://`` (a local or mounted path, as is), ``s3://`` and ``gs://`` through
pyarrow's filesystems (credentials as pyarrow reads them: the cloud's usual environment
variables or instance roles). The work runs on local files: an input (queries, a BEIR dataset,
a corpus) is copied into a temporary folder first; an output is written there and copied up
only once complete, so nobody reads half of it (a command that fails copies up only what it reads
back, whole files only, so that it resumes). What a command reads back from its own earlier
output (``tessera bench``'s saved runs and MLflow store) is copied down into that folder first,
so a remote output resumes and grows as a local one does. Indices are local or mounted folders only:
their shards are opened as files (FAISS, Parquet); docs/cluster.md says how to share them.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from operators.errors import SpecError, see_docs

logger = logging.getLogger(__name__)

#: Schemes read and written through pyarrow (``gcs`` is pyarrow's other name for ``gs``).
SCHEMES = ("file", "s3", "gs", "gcs")


def is_uri(value: Any) -> bool:
    return isinstance(value, str) and "://" in value


def check_scheme(value: str, field: str) -> None:
    """A scheme Tessera does not read or write is one clear error, before anything runs (no network)."""
    scheme = value.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise SpecError(f"--{field} '{value}': the scheme '{scheme}://' is not supported: give a local path, "
                        "file://, s3:// or gs://", field=field)


def filesystem(value: str, field: str) -> tuple[Any, str]:
    """``(pyarrow filesystem, path in it)`` for a URI (an S3 one may ask the bucket's region on the network)."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    check_scheme(value, field)
    if (local := file_uri_path(value)) is not None:
        return pafs.LocalFileSystem(), local
    try:
        return pafs.FileSystem.from_uri(value)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise SpecError(f"--{field} '{value}': {err}", field=field) from None


def file_uri_path(value: str) -> str | None:
    """A ``file://`` URI's path, ``%XX`` decoded and the rest as written; None for another URI or host. pyarrow's
    parser refused a space or an ``ë`` in it ("syntax error at character"), and ended the path at a ``#`` or ``?``
    without a word: ``--out 'file:///data/run #1/r.parquet'`` wrote ``/data/run `` (a file URI has no fragment
    or query to give)."""
    from urllib.parse import unquote

    if value[:7].lower() != "file://":
        return None
    host, slash, path = value[7:].partition("/")
    return unquote(slash + path) if slash and host.lower() in ("", "localhost") else None


def local_path(value: str | None, field: str) -> str | None:
    """A ``file://`` URI as its path; a local path as is; other URIs are refused (a local folder is needed)."""
    if not is_uri(value):
        return value
    check_scheme(value, field)
    if not value.lower().startswith("file://"):
        raise SpecError(f"--{field} '{value}' must be a local or mounted path (or file://): it is opened as files; "
                        f"mount the bucket on every node; see {see_docs('cluster')}", field=field)
    return filesystem(value, field)[1]


@contextlib.contextmanager
def local_input(value: str | None, field: str) -> Iterator[str | None]:
    """The input as a local path: itself, a ``file://`` URI's path, or a temporary copy of a remote file or folder."""
    if not is_uri(value):
        yield value
        return
    with fetched(*filesystem(value, field), label=f"--{field} '{value}'", field=field) as path:
        yield path


@contextlib.contextmanager
def local_output(value: str | None, field: str, *, reads_back: tuple[str, ...] = ()) -> Iterator[str | None]:
    """Where to write the output locally; a remote URI gets it copied up (file or folder) when the block ends
    without an error. ``reads_back``: names in a remote output folder that the work reads again (a cache, a
    store it appends to): those there are copied down first."""
    if not is_uri(value):
        yield value
        return
    with pushed(*filesystem(value, field), reads_back=reads_back) as path:
        yield path


@contextlib.contextmanager
def fetched(fs: Any, path: str, *, label: str, field: str) -> Iterator[str]:
    """``path`` on ``fs`` as a local path (a temporary copy unless ``fs`` is the local filesystem)."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        yield path
        return
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        raise SpecError(f"{label} does not exist", field=field)
    with tempfile.TemporaryDirectory(prefix="tessera-in-") as folder:
        local = Path(folder) / PurePosixPath(path).name
        pafs.copy_files(path, str(local), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
        yield str(local)


@contextlib.contextmanager
def pushed(fs: Any, path: str, *, reads_back: tuple[str, ...] = ()) -> Iterator[str]:
    """A local path to write; what is there when the block ends is copied to ``path`` on ``fs``. ``reads_back``:
    names under the folder ``path`` copied down first (``fetched_back``), and the only ones copied up when the
    block fails or is interrupted, so that the same command resumes from the work finished before, as it does
    from a local folder (a benchmark's saved runs: an hour of flows is not run again for the last one's error)."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tessera-out-") as folder:
        local = Path(folder) / PurePosixPath(path).name
        fetched_back(fs, path, local, reads_back)
        try:
            yield str(local)
        except BaseException:
            _pushed_back(fs, path, local, reads_back)
            raise
        fs.create_dir(str(PurePosixPath(path).parent) if local.is_file() else path)
        pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def _pushed_back(fs: Any, path: str, local: Path, names: tuple[str, ...]) -> None:
    """After a failure: copy each of ``names`` that is under ``local`` up to the folder ``path``, leaving out the
    temporary files of an atomic write cut short (``.NAME.PID.tmp``). An upload that fails itself is logged,
    never raised over the error that brought us here."""
    import pyarrow.fs as pafs

    for name in names:
        source = local / name
        files = [source] if source.is_file() else sorted(f for f in source.rglob("*") if f.is_file())
        for file in files:
            if not file.exists() or (file.name.startswith(".") and file.name.endswith(".tmp")):
                continue
            target = f"{path.rstrip('/')}/{file.relative_to(local).as_posix()}"
            try:
                fs.create_dir(str(PurePosixPath(target).parent))
                pafs.copy_files(str(file), target, source_filesystem=pafs.LocalFileSystem(),
                                destination_filesystem=fs)
            except Exception as err:  # noqa: BLE001  (the first error is the one to report)
                logger.warning("could not copy %s back to %s: %s", file.name, target, err)
                return


def fetched_back(fs: Any, path: str, local: Path, names: tuple[str, ...]) -> None:
    """Copy each of ``names`` (file or folder) under the folder ``path`` on ``fs`` into the folder ``local``,
    those that are there: a first run finds none, which is fine."""
    import pyarrow.fs as pafs

    for name in names:
        source = f"{path.rstrip('/')}/{name}"
        info = fs.get_file_info(source)
        if info.type == pafs.FileType.NotFound:
            continue
        target = local / name
        (target if info.type == pafs.FileType.Directory else target.parent).mkdir(parents=True, exist_ok=True)
        pafs.copy_files(source, str(target), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
