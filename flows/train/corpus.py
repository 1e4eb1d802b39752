"""The corpus file mining reads: checked before any index is built, and its texts by id, first copy wins.

A corpus that is not JSONL (a TSV file named ``corpus.jsonl``), holds no document, or has
records without an id or a ``text`` field would otherwise build an empty index (minutes on a real
corpus) and then fail with a JSON traceback, so ``check_corpus`` reads it first and names
the file and line. Ids are read as ingestion reads them (``default_id``: ``_id``, then ``docno``, ``id``,
``doc_id``), and a repeated id keeps its first copy, as ingestion does
(``flows.ingestion.duplicates``), so the texts mining trains on are the documents the index holds.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

from flows.train.errors import TrainError
from operators.errors import one_line
from operators.sources._common import default_id

#: Where a problem is shown: the corpus's own line, cut.
_SHOWN = 80


def check_corpus(corpus: Path, *, field: str = "dataset") -> int:
    """Raise a one-line ``TrainError`` naming ``corpus`` (and the line) unless every non-blank line is a JSON
    object with an id and a ``text`` field and there is at least one; returns how many ids repeat an earlier one."""
    seen: set[str] = set()
    documents = repeated = 0
    try:
        with open(corpus, "rb") as f:
            for number, raw in enumerate(f, 1):
                line = _line_text(corpus, number, raw, field)
                if not line.strip():
                    continue
                doc = _record(corpus, number, line, field)
                documents += 1
                key = default_id(doc)
                if key is None:  # a 'docid': every pseudo-query of such documents was 'pseudo-', refused as repeated
                    raise TrainError(f"corpus {corpus} line {number} has no id (fields: {', '.join(doc) or 'none'}): "
                                     "a document's id is its '_id', else its 'docno', 'id' or 'doc_id', as the qrels "
                                     "name it", field=field)
                repeated += key in seen
                seen.add(key)
    except OSError as err:
        raise TrainError(f"cannot read corpus {corpus}: {err.strerror or err}", field=field) from None
    if not documents:
        raise TrainError(f"corpus {corpus} is empty: there is no document to mine examples from", field=field)
    return repeated


def _line_text(corpus: Path, number: int, raw: bytes, field: str) -> str:
    """A corpus line's text (a byte order mark is not part of the first document); one that is not UTF-8 (Notepad's
    Windows-1252) is a ``TrainError`` naming its line and the byte as a source's reader names them
    (``encoding.undecodable_line``), and the iconv line. It named a byte's offset in the block Python had decoded,
    not in the file, and nothing to do."""
    try:
        return (raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw).decode("utf-8")
    except UnicodeDecodeError as err:
        from operators.sources.encoding import save_as_utf8, undecodable_line

        raise TrainError(f"corpus {corpus} line {number}: {undecodable_line(err)}; {save_as_utf8(raw)}",
                         field=field) from None


def _record(corpus: Path, number: int, line: str, field: str) -> dict:
    shown = one_line(line, _SHOWN)
    try:
        doc = json.loads(line)
    except ValueError as err:
        raise TrainError(f"corpus {corpus} line {number} is not JSON ({err.msg}: {shown!r}): corpus.jsonl holds one "
                         "JSON object per line, such as {\"_id\": \"d1\", \"title\": \"...\", \"text\": \"...\"}",
                         field=field) from None
    if not isinstance(doc, dict):
        raise TrainError(f"corpus {corpus} line {number} is a JSON {type(doc).__name__}, not an object ({shown!r}): "
                         "corpus.jsonl holds one {\"_id\": ..., \"text\": ...} object per line", field=field)
    if "text" not in doc:
        raise TrainError(f"corpus {corpus} line {number} has no 'text' field (fields: {', '.join(doc) or 'none'}): "
                         "every document needs its text under 'text'", field=field)
    return doc


def corpus_texts(corpus: Path, wanted: set[str]) -> dict[str, str]:
    """The texts (title, newline, text: what the rerankers read) of the ``wanted`` ids; a repeated id keeps its
    first copy, as ingestion does."""
    from operators.tables import document_text

    texts: dict[str, str] = {}
    with open(corpus, encoding="utf-8-sig") as f:  # as ingestion reads it: a byte order mark dropped
        for line in f:
            if not line.strip():
                continue
            doc = json.loads(line)
            key = default_id(doc)
            if key in wanted and key not in texts:
                texts[key] = document_text(doc.get("text"), doc.get("title"))
    return texts
