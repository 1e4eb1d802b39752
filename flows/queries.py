"""Reading query sets (``qid, query`` tables) from files or literal queries (writing results:
``flows.results_file``, whose ``write_results`` this module passes on).

Query files, by suffix:

* ``.jsonl`` / ``.ndjson`` / ``.json`` (one object a line): BEIR ``queries.jsonl``
  (``_id``, ``text``) or ``qid``/``query`` (``query_id`` and ``id`` are accepted for the id).
* ``.tsv``: ``qid<TAB>query`` per line; a first line of an id name and a text name (``qid<TAB>query``,
  ``_id<TAB>text``, ``query_id<TAB>text``...) is a header and skipped; such a line anywhere else is a query.
* ``.txt``: one query a line, numbered ``1``, ``2``...
* a TREC topic file (``.txt``, ``.xml`` or any other suffix, known by its first tag): a query a topic
  (``flows.trec_topics``).
* ``.parquet`` / ``.csv``: columns ``qid, query`` (or ``_id, text``).

``-`` reads standard input, and a pipe or FIFO without one of these suffixes (``/dev/stdin``, ``<(...)``) is
read the same way: a TREC topic file when it starts with ``<top>`` or ``<topics``, JSON lines when its first
non-blank character is ``{``, a JSON array of query objects when it is ``[`` (as a ``.json`` file may hold),
else one query a line. A UTF-8 byte order mark is dropped.

Only ``qid`` (as a string) and ``query`` are kept, and a JSONL record's ``messages`` (the
conversation before the question, OpenAI-style ``[{role, content}, ...]``, kept as JSON text
in a ``messages`` column for ``query.contextualize`` and ``retrieve.messages``: follow-up
questions). Anything that is not an existing
file and does not look like a file name (``looks_like_path``: no whitespace, a known suffix or a ``/``) is a literal
query with qid ``1``; several literal queries (``read_query_texts``) are numbered ``1``, ``2``...
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from flows.query_limits import check_length as _check_length, max_query_chars
from flows.query_paths import QUERY_SUFFIXES, looks_like_path
from flows.results_file import write_results  # noqa: F401 - flows.queries.write_results, as documented
from flows.trec_topics import read_topics, topic_form
from operators.errors import SpecError, one_line, short_repr
from operators.json_tree import json_kind
from operators.path_access import windows_path
from operators.sources.encoding import save_as_utf8, wide_encoding
from operators.unicode import blank, first_broken_text

#: The names a queries file may give its qids and texts (a queries table named so is told the rename to qid, query).
ID_FIELDS = ("qid", "_id", "query_id", "id")  # query_id: ir_datasets' name
TEXT_FIELDS = ("query", "text")


def read_queries(source: str | Path) -> pa.Table:
    """A ``qid, query`` table from a query file, ``-`` (standard input) or a literal query text."""
    if not isinstance(source, (str, Path)):  # None, a list: Path()'s bare TypeError before
        raise SpecError(f"queries are a file, '-' (standard input) or a query's text, got {type(source).__name__} "
                        f"{short_repr(source)}", field="queries")
    if isinstance(source, str) and source == "-":
        return _checked(_sniffed(_stdin_bytes(), STDIN), STDIN)
    path = Path(source)
    try:
        if str(source).startswith("~"):  # read_queries("~/q.jsonl") in Python: the shell expands it for --queries
            path = path.expanduser()
    except RuntimeError:  # ~word names no user: a query's text, or a file not found, below
        pass
    try:
        # a pipe (``-q /dev/stdin``, ``<(...)``, a FIFO) or a device is read as a file too: not a folder is enough
        is_file = path.exists() and not path.is_dir()
    except OSError:  # a long literal query is not a valid file name
        is_file = False
    if not is_file:
        if isinstance(source, Path) or looks_like_path(str(source)):
            raise SpecError(_not_a_queries_file(path, source), field="queries")
        text = str(source).strip()
        if blank(text):
            raise SpecError("the query is empty", field="queries")
        _check_length(text, "the query", max_query_chars())
        last = (text.split() or [""])[-1]
        if last.lower().endswith(QUERY_SUFFIXES) and not last.startswith("."):  # 'my queries.jsonl': a file's
            # name with a space, not there ('what is a .csv' names none)
            logging.getLogger("flows.queries").warning(
                "--queries %s is no file in %s: it is searched as one query's text", short_repr(text, 200),
                os.getcwd(), extra={"note": True})
        return _table([("1", text)])
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".csv"):
            return _checked(_read_columnar(path), path)
        if suffix not in QUERY_SUFFIXES and not path.is_file():  # /dev/stdin, /dev/fd/63: no suffix to go by
            return _checked(_sniffed(path.read_bytes(), path), path)
        data = path.read_bytes()
        if suffix in (".txt", ".xml") or suffix not in QUERY_SUFFIXES:  # topics.301-450, topics.xml, topics.txt
            if topic_form(data[:4096].decode("utf-8", "replace").lstrip("\ufeff")):
                return _checked(_topics(_utf8_text(data, path), path), path)
        if suffix not in QUERY_SUFFIXES:
            what = (f"unknown queries file type '{suffix}'" if suffix
                    else "the queries file has no suffix to say its type")
            raise SpecError(f"{path}: {what} (use one of {', '.join(QUERY_SUFFIXES)}, or a TREC topic file)",
                            field="queries")
        text = _utf8_text(data, path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
        raise SpecError(f"{path}: not a readable {suffix[1:] or 'queries'} queries file ({one_line(err, 160)})",
                        field="queries") from None
    if suffix == ".tsv":
        return _checked(_read_tsv(text, path), path)
    if suffix == ".txt":
        return _checked(_read_lines(text, path), path)
    if suffix == ".json" and text.lstrip().startswith("["):
        return _checked(_read_array(text, path), path)
    if suffix == ".json" and (one := _one_object(text)) is not None:  # a query object over several lines
        pairs: list[tuple[str, str, str]] = []
        conversations: list[str | None] = []
        _record(one, f"{path}: the query", pairs, conversations)
        return _checked((pairs, conversations), path)
    return _checked(_read_jsonl(text, path), path)


#: How standard input is named in errors.
STDIN = "<stdin>"


def _not_a_queries_file(path: Path, source: object) -> str:
    """Why ``source`` is not read: missing, or a folder (naming the queries file in it, as a BEIR folder has)."""
    try:
        folder = path.is_dir()
    except OSError:
        folder = False
    if not folder:
        windows = windows_path(str(source))
        return f"queries file not found: {source}{f', {windows}' if windows else ''}"
    inside = [f"queries{suffix}" for suffix in QUERY_SUFFIXES if (path / f"queries{suffix}").is_file()]
    hint = f"; did you mean {path / inside[0]}?" if inside else ""
    return f"{source} is a folder, not a queries file{hint}"


#: What a reader returns: each query's (qid, text, where it was read: ``FILE:LINE``, ``FILE: row N``...), and each
#: query's ``messages`` as JSON text (empty when the format has none).
Read = tuple[list[tuple[str, str, str]], list[str | None]]


def _stdin_bytes() -> bytes:
    """Standard input's bytes, or one ``SpecError``: a closed stdin (``<&-``, where Python's ``sys.stdin`` is None)
    or one opened for writing only reached users as an internal error."""
    if sys.stdin is None:
        raise SpecError(f"{STDIN} is closed: pipe the queries in, or give a queries file or a query's text",
                        field="queries")
    try:
        return sys.stdin.buffer.read()
    except OSError as err:
        raise SpecError(f"cannot read the queries from {STDIN}: {err.strerror or err}", field="queries") from None


def _sniffed(data: bytes, where: str | Path) -> Read:
    """Queries without a suffix to go by (``-``, a pipe): JSON lines when the first non-blank character is ``{``, a
    JSON array of query objects when it is ``[``, ``qid<TAB>query`` lines when every line holds a tab (a TSV piped
    in was searched for line by line, its qids in the text), else one query a line."""
    text = _utf8_text(data, where)
    first = text.lstrip()[:1]
    if topic_form(text):
        return _topics(text, where)
    if first == "{":
        return _read_jsonl(text, where)
    if first == "[":
        return _read_array(text, where)
    lines = [line for line in text.split("\n") if line.strip()]
    if lines and all("\t" in line.strip(" \r") for line in lines):
        return _read_tsv(text, Path(where))
    return _read_lines(text, where)


def _topics(text: str, where: str | Path) -> Read:
    """A TREC topic file's queries (``flows.trec_topics``): each topic's number and title."""
    topics = read_topics(text, where)
    return topics, [None] * len(topics)


def _utf8_text(data: bytes, where: str | Path) -> str:
    """A queries file's text, a byte order mark dropped (it is not part of the first query); a ``SpecError`` for
    one that is not UTF-8, and for UTF-16 whose Latin text, every other byte a NUL, is valid UTF-8."""
    if (wide := wide_encoding(data)) is not None:
        raise SpecError(f"{where}: the queries file is {wide[0]} text ({wide[1]}); save it as UTF-8 (iconv -f "
                        f"{wide[0]} -t UTF-8 FILE > NEW_FILE)", field="queries")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SpecError(_not_utf8(err, where), field="queries") from None


def _not_utf8(err: UnicodeDecodeError, where: str | Path) -> str:
    """Where the first byte that is not UTF-8 is, and the ``iconv`` line that converts the file from the encoding
    charset-normalizer guesses (as ingestion guesses one): the advice was ``iconv -f latin1``, which turns the curly
    quotes of Excel's Windows-1252 (0x93, 0x94) into C1 control characters."""
    line = err.object[:err.start].count(b"\n") + 1
    return (f"{where}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at byte {err.start + 1} of the "
            f"file); {save_as_utf8(err.object, 'the queries file')}")


def _checked(read: Read, where: str | Path) -> pa.Table:
    """The queries table, once every qid is given once and not empty and every query has text, naming the line."""
    triples, conversations = read
    if not triples:
        raise SpecError(f"{where} holds no queries", field="queries")
    first: dict[str, str] = {}
    longest = max_query_chars()
    for qid, text, at in triples:
        if not qid.strip():
            raise SpecError(f"{at}: the qid is empty (each query needs an id)", field="queries")
        if qid in first:
            raise SpecError(f"{at}: qid '{qid}' appears twice (first at {first[qid]})", field="queries")
        if blank(text):  # it would be searched for nothing, and answered with arbitrary documents
            raise SpecError(f"{at}: query '{qid}' is empty", field="queries")
        _check_length(text, f"{at}: query '{qid}'", longest)
        first[qid] = at
    table = _table([(qid, text) for qid, text, _ in triples])
    if any(c is not None for c in conversations):
        table = table.append_column("messages", pa.array(conversations, pa.string()))
    return table


def read_query_texts(texts: list[str]) -> pa.Table:
    """A ``qid, query`` table of several literal queries (``--queries`` given more than once), numbered ``1``,
    ``2``, ... in order. A file or ``-`` among them is refused: it would be read as a query's text."""
    for n, text in enumerate(texts, 1):
        if text.strip() == "-" or looks_like_path(text) or os.path.isfile(text):
            raise SpecError(f"--queries #{n} ({short_repr(text)}) is a queries file or '-': with several --queries "
                            "each is one query's text; give a file or '-' alone", field="queries")
    return _checked(([(str(n), text.strip(), f"--queries #{n}") for n, text in enumerate(texts, 1)], []),
                    "--queries")


def _table(pairs: list[tuple[str, str]]) -> pa.Table:
    return pa.table({"qid": pa.array([q for q, _ in pairs], pa.string()),
                     "query": pa.array([t for _, t in pairs], pa.string())})


def _pick(record: dict, names: tuple[str, ...]):
    return next((record[n] for n in names if n in record and record[n] is not None), None)


def _read_lines(text: str, where: str | Path) -> Read:
    """One query a line, numbered 1, 2, ... (blank lines skipped)."""
    lines = [(f"{where}:{n}", line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [(str(i), line, at) for i, (at, line) in enumerate(lines, 1)], []


def _read_jsonl(text: str, where: str | Path) -> Read:
    """The (qid, text) pairs, and each query's ``messages`` as JSON text (None where it has none)."""
    pairs, conversations = [], []
    # lines end at "\n" only, as a file's lines do: str.splitlines also cuts at U+2028 and U+0085, which JSON
    # strings may hold as they are
    for line_no, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise SpecError(f"{where}:{line_no}: not JSON ({err.msg})", field="queries") from None
        _record(record, f"{where}:{line_no}", pairs, conversations)
    return pairs, conversations


def _one_object(text: str) -> dict | None:
    """The one JSON object of a ``.json`` file that holds one (pretty-printed, it was read line by line as JSON lines
    and called "not JSON"); None for anything else, JSON lines included."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _read_array(text: str, where: str | Path) -> Read:
    """A JSON array of query objects (a ``.json`` file, or standard input that starts with ``[``)."""
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"{where}: not a JSON array of queries ({err.msg}, line {err.lineno})",
                        field="queries") from None
    pairs: list[tuple[str, str, str]] = []
    conversations: list[str | None] = []
    for n, record in enumerate(records, 1):
        _record(record, f"{where}: query {n} of the array", pairs, conversations)
    return pairs, conversations


def _record(record, where: str, pairs: list, conversations: list) -> None:
    """One query object: its (qid, text, where) and its ``messages``, appended; a clear error naming ``where``
    else."""
    if not isinstance(record, dict):
        raise SpecError(f"{where}: a query is a JSON object such as {{\"_id\": \"q1\", \"text\": \"...\"}}, not "
                        f"{json_kind(record)}" + (" (a JSON array of queries is read from a .json file or standard "
                                                   "input, not a JSON lines file)" if isinstance(record, list) else ""),
                        field="queries")
    if (broken := first_broken_text(record)) is not None:  # JSON's "\ud800": no table, index or answer holds it
        raise SpecError(f"{where}: {broken[0]} {broken[1]}", field="queries")
    qid, text = _pick(record, ID_FIELDS), _pick(record, TEXT_FIELDS)
    if qid is None or text is None:  # said which, with the fields there: {"id", "question"} was told it lacked an id
        lacks = " and ".join(what for what, value in ((f"an id ({' or '.join(ID_FIELDS)})", qid),
                                                      (f"a text ({' or '.join(TEXT_FIELDS)})", text)) if value is None)
        raise SpecError(f"{where}: a query needs {lacks}; its fields: {', '.join(map(repr, record)) or 'none'}",
                        field="queries")
    if not isinstance(text, str) or isinstance(qid, (bool, list, dict)):  # ["a", "b"] was searched as "['a', 'b']"
        what, value = ("text", text) if not isinstance(text, str) else ("id", qid)
        raise SpecError(f"{where}: a query's {what} is a JSON string, not {json_kind(value)}"
                        + (" (an id may be a number too)" if what == "id" else ""), field="queries")
    messages = record.get("messages")
    if messages is not None and not (isinstance(messages, list) and all(isinstance(m, dict) and "role" in m
                                                                          for m in messages)):
        raise SpecError(f"{where}: 'messages' must be a list of {{role, content}} objects (the "
                        "conversation before the question)", field="queries")
    pairs.append((str(qid), str(text), where))
    conversations.append(json.dumps(messages, ensure_ascii=False) if messages is not None else None)


def _read_tsv(content: str, path: Path) -> Read:
    pairs = []
    for line_no, line in enumerate(content.split("\n"), 1):  # "\n" only, as for JSON lines
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        if len(parts) != 2:
            raise SpecError(f"{path}:{line_no}: expected 'qid<TAB>query'", field="queries")
        qid, text = parts[0].strip(), parts[1].strip()
        if line_no == 1 and qid in ID_FIELDS and text in TEXT_FIELDS:
            continue  # header
        pairs.append((qid, text, f"{path}:{line_no}"))
    return pairs, []


def _read_columnar(path: Path) -> Read:
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        _check_names(pq.ParquetFile(path).schema_arrow.names, path)  # (reading two of one name fails in Arrow's words)
        table = pq.read_table(path)
    else:
        import pyarrow.csv as pacsv

        data, parse = _csv_text(path)
        names = pacsv.open_csv(io.BytesIO(data), parse_options=parse).schema.names
        _check_names(names, path)
        # every column as its text: a qid 007 is not the number 7, nor a query 1984 a number
        table = pacsv.read_csv(io.BytesIO(data), parse_options=parse, convert_options=pacsv.ConvertOptions(
            column_types={name: pa.string() for name in names}))
    names = table.column_names
    qid_col = next((n for n in ID_FIELDS if n in names), None)
    text_col = next((n for n in TEXT_FIELDS if n in names), None)
    if qid_col is None or text_col is None:
        raise SpecError(f"{path}: needs columns qid and query (or _id and text), has {one_line(names, 160)}",
                        field="queries")
    for column, numbers in ((qid_col, True), (text_col, False)):
        if not text_like(table.schema.field(column).type, numbers=numbers):
            what = "text or whole numbers" if numbers else "text"
            raise SpecError(f"{path}: column {column} holds {table.schema.field(column).type}, not {what}",
                            field="queries")
    rows = zip(table.column(qid_col).to_pylist(), table.column(text_col).to_pylist())
    return [("" if q is None else str(q), "" if t is None else str(t), f"{path}: row {n}")  # None: refused as empty
            for n, (q, t) in enumerate(rows, 1)], []


def _csv_text(path: Path) -> tuple[bytes, Any]:
    """A CSV queries file's UTF-8 bytes, its line ends newlines (Python's universal newlines: a query quoted over two
    lines of a Windows file held its carriage return), and how to parse it: by its header's delimiter where that
    is not a comma (Excel's CSV in much of Europe, ``qid;query``). A file not in UTF-8 (Excel's plain CSV on Windows
    is Windows-1252) is refused as the other queries files are, naming the byte and the iconv line; pyarrow said
    'CSV conversion error to string: invalid UTF8 data' of a column."""
    import pyarrow.csv as pacsv

    text = io.StringIO(_utf8_text(path.read_bytes(), path), newline=None).read()
    header = text.split("\n", 1)[0]
    try:
        delimiter = csv.Sniffer().sniff(header, delimiters=",;\t|").delimiter
    except csv.Error:  # one column
        delimiter = ","
    names = header.split(delimiter)
    if not (set(names) & set(ID_FIELDS) and set(names) & set(TEXT_FIELDS)):
        delimiter = ","
    return text.encode("utf-8"), pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)


def _check_names(names: list[str], path: Path) -> None:
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        raise SpecError(f"{path}: column(s) {', '.join(repeated)} appear more than once", field="queries")


def text_like(kind: pa.DataType, *, numbers: bool) -> bool:
    """Whether a column of ``kind`` holds what a qid (``numbers``: whole numbers too) or a query's text may be, cast to
    text: other string types, nulls, pandas' categorical of strings. A list, bytes or a struct would be searched as
    its Python spelling (``"['honey']"``). One rule for a queries file and a queries table (``executors.base``)."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind) \
        or pa.types.is_null(kind) \
        or pa.types.is_dictionary(kind) and (pa.types.is_string(kind.value_type)  # pandas' categorical: large_string
                                             or pa.types.is_large_string(kind.value_type)) \
        or numbers and pa.types.is_integer(kind)
