"""The files of a BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

``load_qrels`` is public: the benchmarker reads relevance judgements with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from operators.errors import SourceError, SourceNotFoundError
from operators.sources.encoding import save_as_utf8, undecodable_line


def _where(op: Any) -> dict[str, Any]:
    return {"op": getattr(op, "name", None), "step": getattr(op, "step_id", None)}


def beir_file(folder: str | Path, stem: str, *, op: Any = None) -> Path:
    """``<folder>/<stem>.jsonl`` (or ``.jsonl.gz``); the error lists what the folder holds."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SourceNotFoundError(f"BEIR folder '{folder}' does not exist", field="params.folder", **_where(op))
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    present = sorted(p.name for p in folder.iterdir())
    raise SourceNotFoundError(
        f"BEIR folder '{folder}' has no {stem}.jsonl (it holds {present})", field="params.folder", **_where(op)
    )


def qrels_splits(folder: str | Path) -> list[str]:
    """Names of the qrels splits of a BEIR folder (``test``, ``train``, ``dev``...)."""
    qrels = Path(folder) / "qrels"
    return sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []


def load_qrels(folder: str | Path, split: str = "test", *, op: Any = None) -> pa.Table:
    """Relevance judgements of one split: ``qid: string, docno: string, relevance: int32``.

    Reads ``<folder>/qrels/<split>.tsv``: BEIR's tab-separated ``query-id, corpus-id,
    score`` with a header line (the first, its grade a column name), or TREC's four columns ``qid 0 docno
    relevance`` (tabs or spaces). A header line names the columns: with more than three (``query-id corpus-id
    score note``), the lines of its width are read by those names. A byte order mark, Windows line ends, blank
    lines and the spaces around a tab-separated cell are dropped: they would make ids that match nothing. A grade
    is a whole number (``1.0`` reads as 1, ``1.5`` is an error naming its line: ir-measures' grades are integers).
    A judgement given twice counts once; given twice with two grades, it is an error naming both lines (which grade
    was meant?).
    """
    path = Path(folder) / "qrels" / f"{split}.tsv"
    if not path.is_file():
        raise SourceNotFoundError(
            f"no qrels file '{path}'; splits in that folder: {qrels_splits(folder) or 'none'}",
            field="params.split", **_where(op),
        )
    qids: list[str] = []
    docnos: list[str] = []
    relevance: list[int] = []
    seen: dict[tuple[str, str], tuple[int, int]] = {}  # (qid, docno) -> (line, grade)
    named: tuple[int, ...] | None = None  # a header line's query, document and grade columns, by their names
    for number, parts, first in _qrels_lines(path, op):
        if first and (named := _header_columns(parts)) is not None:
            continue
        if named is not None and len(parts) == named[3]:  # the header's columns, extra ones too
            parts = [parts[named[0]], parts[named[1]], parts[named[2]]]
        elif len(parts) == 4:  # TREC: qid iteration docno relevance
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise SourceError(f"{path}, line {number}: expected 3 columns (query-id, corpus-id, score: BEIR) or 4 "
                              f"(qid, iteration, docno, relevance: TREC), separated by tabs or spaces; got "
                              f"{len(parts)} (more columns read by a first line naming them: "
                              f"'query-id corpus-id score note'){_why_short(parts)}", **_where(op))
        try:
            grade = float(parts[2])
        except ValueError:
            raise SourceError(f"{path}, line {number}: relevance '{parts[2]}' is not a number"
                              + (" (a header line names its third column score)" if first else ""),
                              **_where(op)) from None
        if not grade.is_integer():  # ir-measures takes whole grades: 1.5 would be read as 1, silently
            raise SourceError(f"{path}, line {number}: relevance '{parts[2]}' is not a whole number (grades are "
                              "0, 1, 2, ...)", **_where(op))
        if abs(grade) > _GRADE_LIMIT:
            raise SourceError(f"{path}, line {number}: relevance '{parts[2]}' is out of range (grades are whole "
                              f"numbers from -{_GRADE_LIMIT} to {_GRADE_LIMIT})", **_where(op))
        score = int(grade)
        key = (parts[0], parts[1])
        if key in seen:
            line, judged = seen[key]
            if judged != score:
                raise SourceError(f"{path}, line {number}: query '{key[0]}' and document '{key[1]}' are judged "
                                  f"{score} here and {judged} on line {line}: keep one judgement", **_where(op))
            continue
        seen[key] = (number, score)
        qids.append(parts[0])
        docnos.append(parts[1])
        relevance.append(score)
    return pa.table({
        "qid": pa.array(qids, pa.string()),
        "docno": pa.array(docnos, pa.string()),
        "relevance": pa.array(relevance, pa.int32()),
    })


#: The grade column's names in a qrels file's header line (BEIR's is ``score``); only the first line may be one.
_HEADER_GRADES = frozenset({"score", "relevance", "rel", "label", "grade", "judgement", "judgment"})
#: A header line's names of the query's and the document's columns (else the first and the second are).
_HEADER_QUERIES = frozenset({"query-id", "query_id", "queryid", "qid", "query", "topic", "topic-id", "topic_id"})
_HEADER_DOCS = frozenset({"corpus-id", "corpus_id", "doc-id", "doc_id", "docid", "docno", "document", "doc",
                          "document-id", "document_id", "pid", "passage-id", "passage_id"})


def _header_columns(cells: list[str]) -> tuple[int, int, int, int] | None:
    """The query's, document's and grade's columns a header line names, and its width; ``None`` for a judgement.
    A header of more columns than BEIR's three (``query-id corpus-id score source``) was read as TREC's four, its
    grade taken from the extra column."""
    if len(cells) < 3 or _is_number(cells[3] if len(cells) == 4 else cells[2]):  # a judgement, BEIR's or TREC's
        return None
    names = [cell.lower() for cell in cells]
    grade = next((i for i, name in enumerate(names) if name in _HEADER_GRADES), None)
    if grade is None:
        return None
    query = next((i for i, name in enumerate(names) if name in _HEADER_QUERIES), 0)
    doc = next((i for i, name in enumerate(names) if name in _HEADER_DOCS), 1)
    return query, doc, grade, len(cells)


def _why_short(parts: list[str]) -> str:
    """What a line of too few columns most likely is: a CSV's (its commas are no separator here), or pairs without
    their grade."""
    if len(parts) < 3 and any("," in part for part in parts):
        return "; its columns are separated by commas, which a qrels file's are not: write tabs between them"
    if len(parts) == 2:
        return "; each judgement needs its grade, a third column (1: relevant, as in 'q1<TAB>d1<TAB>1')"
    return ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


#: The largest grade: they are stored as int32.
_GRADE_LIMIT = 2**31 - 1


def _qrels_lines(path: Path, op: Any):
    """``(line number, cells, whether it is the first line with any)`` of a qrels file, blank lines skipped; a file
    that is not UTF-8 is an error naming it and the line."""
    first = True
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise SourceError(f"{path}, line {number}: {undecodable_line(err)}; {save_as_utf8(raw, 'the qrels')}",
                                  **_where(op)) from None
            parts = [p.strip() for p in line.split("\t")] if "\t" in line else line.split()
            while parts and not parts[-1]:  # a trailing tab
                parts.pop()
            if parts:
                yield number, parts, first
                first = False
