"""The FILE of ``tessera index add/update``: one JSON Lines file of documents (or standard input), read into chunks
the index takes, each refusal one line naming the file and its line."""

from __future__ import annotations

import contextlib
import shlex
from typing import Iterator

import pyarrow as pa

from flows.commands._support import CliError, rewritten_logs, say_reading_the_terminal


def check_readable(file: str, encoding: str | None = None) -> None:
    """``-`` (standard input), a file, or a pipe or FIFO (``/dev/stdin``, ``<(...)``); a folder or nothing is refused
    naming which it is, and an ``--encoding`` Python does not know or that does not write a newline as one byte; so
    is a file this user may not read, or that lies in a folder it may not enter."""
    import os
    from pathlib import Path

    from operators.errors import SourceError
    from operators.sources.encoding import check_encoding
    from operators.sources.paths import denied

    try:
        check_encoding(encoding, lines=True)
    except SourceError as err:
        raise CliError(err.message, field="--encoding") from None
    if file != "-" and not os.path.isdir(file) and (why := denied(file)) is not None:  # an internal PermissionError
        raise CliError(f"cannot read {file}: {why}; nothing was written", field="FILE")
    if file != "-" and Path(file).is_dir():
        raise CliError(f"{file} is a folder; FILE is one JSON Lines file of documents (to add a folder's files, "
                       f"ingest it: tessera ingest --source {shlex.quote(file)} --index ...)", field="FILE")
    if file != "-" and not Path(file).exists():
        raise CliError(f"no such file: {file}", field="FILE")
    if file != "-" and Path(file).is_file():  # not a pipe: opening one would wait for its writer
        try:
            open(file, "rb").close()
        except OSError as err:  # it said "step 'index', operator 'sources.jsonl': PermissionError: [Errno 13] ..."
            raise CliError(f"cannot read {file}: {err.strerror or err}; nothing was written", field="FILE") from None
    if (kind := _other_format(file)) is not None:  # read as JSON lines, a Parquet file was "not UTF-8: give --encoding"
        raise CliError(f"{file} is a {kind} file; FILE is one JSON Lines file of documents (to add a {kind} file's "
                       f"documents, ingest it: tessera ingest --source {shlex.quote(file)} --index ...)", field="FILE")


def _other_format(file: str) -> str | None:
    """The format ``tessera ingest`` reads ``file`` as, by its suffix, where that is not JSON lines: Parquet, CSV,
    TSV, PDF, Markdown or HTML. A ``.txt`` file is not named: JSON lines are sometimes kept under that suffix."""
    from pathlib import Path

    from flows.ingestion.plan import FORMATS

    name = Path(file).name.lower()
    return next((label for label, suffixes, _, _ in FORMATS if label not in ("JSONL", "text")
                 and name.endswith(suffixes)), None)


def _label(file: str) -> str:
    return "<stdin>" if file == "-" else file


@contextlib.contextmanager
def _as_file(file: str) -> Iterator[str]:
    """A regular file's path; standard input (``-``) or a pipe copied to a temporary ``.jsonl`` file first, as the
    JSONL reader opens a path by its suffix."""
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    if file != "-" and Path(file).is_file():
        yield file
        return
    with tempfile.TemporaryDirectory(prefix="tessera-add-") as folder:
        path = str(Path(folder) / "records.jsonl")
        with open(path, "wb") as out:
            if file == "-":
                say_reading_the_terminal("the documents, one JSON line each,")
                shutil.copyfileobj(sys.stdin.buffer, out)
            else:
                with open(file, "rb") as source:
                    shutil.copyfileobj(source, out)
        yield path


#: How the reader, a flow step named ``index`` here, starts its warnings: words of a flow, not of this command.
_STEP_PREFIX = "sources.jsonl [index]: "
#: Where the reader's advice on a file that is not UTF-8 sends its user: this command's own option instead.
INGEST_ENCODING = "(the encoding param, tessera ingest --encoding)"


@contextlib.contextmanager
def _logged_as(path: str, label: str) -> Iterator[None]:
    """While open, the reader's warnings (``--skip-bad-lines``' lines skipped, an encoding guessed) name ``label``
    where they said ``path``: standard input's temporary copy, gone once the command ends, is ``<stdin>`` to the
    user. They lose the flow step's name (``sources.jsonl [index]:``), which names nothing the user of ``index add``
    gave, and their advice to give an encoding names this command's ``--encoding``, not ``tessera ingest``'s."""

    def renamed(record) -> None:
        message = record.getMessage().replace(path, label).replace(INGEST_ENCODING, "(--encoding)")
        record.msg, record.args = message.removeprefix(_STEP_PREFIX), ()

    with rewritten_logs("operators.sources", renamed), rewritten_logs("tessera.sources", renamed):
        yield


def chunks(settings, file: str, skip_bad_lines: bool, kept_from: str | None = None, adding_to=None,
           cut: dict | None = None, encoding: str | None = None) -> pa.Table:
    """The file's records as chunks, embedded when the index is dense: each record whole (docno = doc_id = record
    id), or cut by the chunker params ``cut`` (``job_params.index_chunking``: as the index's documents were, docno
    ``ID#N``); ``kept_from`` (``update``: the index's path), a passage whose text that index holds for its id keeps
    its vector (``_embedded``); ``adding_to`` (``add``: the index, if there is one), ids live there already are
    refused before anything is embedded, as the commit would refuse them after."""
    from operators.errors import SourceError
    from operators.sources._common import SKIP_HINT
    from operators.sources.jsonl import JsonlSource

    check_readable(file, encoding)
    read = {"encoding": encoding} if encoding else {}
    with _as_file(file) as path, _logged_as(path, _label(file)):
        try:
            docs = JsonlSource({"path": path, "on_error": "skip" if skip_bad_lines else "raise", **read},
                               step_id="index")(pa.table({}))
        except SourceError as err:
            message = err.message.replace(SKIP_HINT, "").replace(path, _label(file)).replace(INGEST_ENCODING,
                                                                                              "(--encoding)")
            raise CliError(f"{message}; nothing was written (--skip-bad-lines skips such lines)",
                           field="FILE") from None
        if docs.num_rows == 0:
            said = _all_skipped(path) if skip_bad_lines else ""
            raise CliError(f"{_label(file)} holds no documents{said}", field="FILE")
        _refuse_repeated_ids(docs, path, _label(file), read)
    if adding_to is not None:
        _refuse_live_ids(docs, adding_to)
    docs = _cut(docs, cut) if cut else _whole_documents(docs.append_column("doc_id", docs.column("docno")))
    return _embedded(docs, settings, kept_from) if settings.dense else docs


def _whole_documents(docs: pa.Table) -> pa.Table:
    """Each record is one passage, its whole document: chunk 0 of 1, as ``tessera ingest`` numbers a document it
    did not cut. Without these an ingested index's added documents had null chunk numbers, and a search whose hits
    were all added ones had no such columns. A record's own field of either name is replaced, as ingest drops it."""
    from operators.tables import set_column

    for name, value in (("chunk_index", 0), ("total_chunks", 1)):
        docs = set_column(docs, name, pa.array([value] * docs.num_rows, pa.int32()))
    return docs


def _cut(docs: pa.Table, params: dict) -> pa.Table:
    """The records cut into passages by ``preprocess.chunk`` with ``params``, as ``tessera ingest`` cuts them
    (``flows.ingestion.shards``): docno ``ID#N``, doc_id the record's id, ``chunk_index`` of ``total_chunks``."""
    from operators.preprocess.chunk import Chunker

    out = Chunker(params, step_id="chunk")(docs)
    return out.drop_columns([c for c in ("chunk_id",) if c in out.column_names])


def _all_skipped(path: str) -> str:
    """What to add to "FILE holds no documents" when ``--skip-bad-lines`` skipped every line of a file that has some
    (each line not blank is a document or skipped): the file is not empty, as those words alone said."""
    with open(path, "rb") as lines:
        if not any(line.strip() for line in lines):
            return ""
    return (": every line was skipped as unreadable (--skip-bad-lines; the warning above names them); nothing was "
            "written")


#: What a record longer than the encoder reads can do: this command cuts records only as the index's documents were
#: cut (the flow step's advice, to chunk with the encoder's tokenizer, is nothing its user can give it).
TRUNCATION_HINT = ("tessera index add and update embed each record whole, as one passage, into an index whose "
                   "documents were not cut (made by tessera index add, or tessera ingest --no-chunk), and BM25 reads "
                   "all of it; tessera ingest --source FILE --index INDEX cuts documents into passages that fit, and "
                   "an index so made has its added records cut alike")


#: The column ``update`` counts the records that kept their vectors by; not written.
KEPT = "_kept"


def _embedded(docs: pa.Table, settings, kept_from: str | None) -> pa.Table:
    """``docs`` with their vectors. With ``kept_from``, a record whose embedded text (title and text) the index
    holds for its id takes the index's vector, not the encoder's (``flows.ingestion.reuse``: a metadata fix
    encodes nothing); such rows are marked in ``KEPT``."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from flows.ingestion import reuse
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder, vectors_to_arrow
    from operators.tables import set_column

    params = reuse.edit_params(settings.encoder)
    embed = SentenceTransformerEmbedder(params, step_id="embed")
    embed.truncation_hint = TRUNCATION_HINT
    if kept_from is None:
        return embed(docs)
    texts, rows = embed.texts(docs), np.arange(docs.num_rows)
    vectors = np.zeros((docs.num_rows, settings.dim), dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="tessera-update-") as folder:
        ids = set(docs.column("doc_id").cast(pa.string()).to_pylist())
        listed = reuse.write(kept_from, Path(folder), ids, params)
        kept = reuse.Reuse(listed, settings.dim).fill(rows, texts, vectors) if listed else rows[:0]
    rest = np.setdiff1d(rows, kept)
    if len(rest):
        vectors[rest] = embed.encode([texts[i] for i in rest])
    docs = set_column(docs, "vector", vectors_to_arrow(vectors))
    return set_column(docs, KEPT, pa.array(np.isin(rows, kept)))


def _refuse_live_ids(docs: pa.Table, index) -> None:
    """Ids the index holds already: an add would embed the whole file, then have its commit refused."""
    live = index.live_doc_ids()
    clash = [d for d in docs.column("docno").to_pylist() if d in live]
    if clash:
        raise CliError(f"document(s) {clash[:5]} ({len(clash)} in all) are already live in {index.path}; nothing was "
                       "embedded or written: replace them with `tessera index update` (or add them under other ids)",
                       field="FILE")


def _refuse_repeated_ids(docs: pa.Table, path: str, label: str, read: dict) -> None:
    """A file that gives an id twice names the repeat's line and the first's, before anything is embedded: the store's
    own refusal named only a shard id that was never made. ``tessera ingest``'s reader finds the lines."""
    import pyarrow.compute as pc

    if pc.count_distinct(docs.column("docno")).as_py() == docs.num_rows:
        return
    from flows.ingestion.ledger import Failure
    from flows.ingestion.reading import iter_documents
    from operators.sources.jsonl import JsonlSource

    for item in iter_documents(JsonlSource({"path": path, **read}, step_id="index")):
        if isinstance(item, Failure) and item.error.startswith("duplicate id"):
            error = item.error.replace(str(item.path), label).replace(path, label)
            raise CliError(f"{label}, line {item.line}: {error}; ids must be unique in the file (`tessera ingest` "
                           "leaves the later copies out, or keeps the last with `--replace`); nothing was written",
                           field="FILE")
