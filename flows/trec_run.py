"""The ranking of a result table as a TREC run (``tessera run --out FILE.trec``, the benchmarker's runs).

A TREC run is ``qid Q0 docno rank score tag`` a line, split at whitespace, so an id that is empty or holds a space
or a tab cannot be written: the checks here run before a run starts (on the queries' qids and on the document ids
of the indices the flow searches, ``check_index_ids``) and before a file is written (on the result's docnos).

The writer is vectorised (Arrow compute and numpy, no Python object per row): a million-row result is written
without first building lists of Python strings, in batches of ``BATCH_ROWS`` lines.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.errors import SpecError, one_line

#: Lines formatted and written at a time.
BATCH_ROWS = 65_536
#: Python's ``repr`` of a float is positional for 1e-4 <= |x| < 1e16, as Arrow's cast to string can be.
_POSITIONAL = (1e-4, 1e16)


def check_trec_ids(values, what: str, hint: str = "") -> None:
    """Refuse the first id that a TREC run cannot hold (empty or with whitespace), naming it; ``hint`` says what to
    do instead."""
    bad = next((v for v in values if not v or any(ch.isspace() for ch in v)), None)
    if bad is not None:
        raise _refused(bad, what, hint)


def _refused(bad: str, what: str, hint: str = "") -> SpecError:
    return SpecError(f"a TREC run cannot hold the {what} {bad!r}: it is empty or has whitespace{hint}", field="out")


def check_index_ids(indices: Iterable[str], hint: str = "") -> None:
    """Refuse, before a run whose ranking becomes a TREC run, an index holding a live document id that the file
    cannot hold, naming the id and the index. The id checked is the one the writer would write (``doc_id``, else
    ``docno``: ``trec_rows``); only the doc stores' id columns are read, memory-mapped (no search structure).
    An index that cannot be opened is left to the step that searches it, which says why."""
    from operators.errors import TesseraError
    from operators.store import Index

    for name in dict.fromkeys(indices):
        try:
            index = Index.open(name, verify=False)
            _, ids = index.columns(["docno", "doc_id"])
        except (OSError, TesseraError):
            continue
        bad = _first_bad(pc.coalesce(_as_text(ids.column("doc_id")), _as_text(ids.column("docno"))).fill_null(""))
        if bad is not None:
            raise SpecError(f"index {index.path} holds the document id {bad!r}, which a TREC run cannot hold (it is "
                            f"empty or has whitespace){hint}", field="out")


#: Every character ``str.isspace`` counts, as a regex class (RE2's ``\\s`` misses some: U+001C-U+001F, U+0085, U+3000);
#: tests/flows/test_trec_run_vectorised.py checks it against Python's.
WHITESPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"


def _check_ids(values: pa.Array, what: str) -> None:
    """``check_trec_ids`` of a string array, without a Python string per row."""
    bad = _first_bad(values)
    if bad is not None:
        raise _refused(bad, what)


def _first_bad(values: pa.Array) -> str | None:
    """The first value that is empty or has whitespace, or None."""
    bad = pc.or_(pc.equal(pc.binary_length(values), 0), pc.match_substring_regex(values, WHITESPACE))
    first = pc.index(bad, True).as_py()
    return values[first].as_py() if first >= 0 else None


def _as_text(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column's values as ``str()`` writes them (nulls stay null): Arrow's cast for strings and integers, Python
    for any other type, whose text Arrow writes differently (``1.0`` as ``1``, ``True`` as ``true``)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind):
        return pc.cast(column, pa.string())
    return pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())


def _floats(column: pa.ChunkedArray, missing: float) -> np.ndarray:
    values = pc.cast(column, pa.float64()).fill_null(missing)
    return values.to_numpy() if isinstance(values, pa.Array) else values.combine_chunks().to_numpy()


def _float_text(values: np.ndarray) -> pa.Array:
    """``repr(float(v))`` of each value: Arrow's shortest round-trip digits where they are written positionally, as
    Python writes them (plus ``.0`` on whole numbers); Python's own ``repr`` for the rest (exponents, which Arrow
    writes differently: ``1.5e-7`` for ``1.5e-07``)."""
    text = pc.cast(pa.array(values, pa.float64()), pa.string())
    size = np.abs(values)
    positional = (size == 0) | ((size >= _POSITIONAL[0]) & (size < _POSITIONAL[1]))
    has_point = pc.match_substring(text, ".").to_numpy(zero_copy_only=False)
    has_exponent = pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
    whole = positional & ~has_point & ~has_exponent
    text = pc.if_else(pa.array(whole), pc.binary_join_element_wise(text, ".0", ""), text)
    other = np.flatnonzero(~positional | has_exponent | ~np.isfinite(values))
    if len(other):
        fixed = pa.array([repr(float(v)) for v in values[other]], pa.string())
        mask = np.zeros(len(values), bool)
        mask[other] = True
        text = pc.replace_with_mask(text, pa.array(mask), fixed)
    return text


@dataclass(frozen=True)
class TrecRows:
    """A result's TREC run, checked and ordered, ready to write: one entry per line."""

    qids: pa.Array
    docnos: pa.Array
    ranks: np.ndarray  # 1, 2, ... within each qid
    scores: np.ndarray  # float32, strictly decreasing within each qid
    tag: str

    def write(self, file: BinaryIO) -> None:
        """Write the lines to a binary file, ``BATCH_ROWS`` at a time."""
        end = f" {self.tag}\n"
        for start in range(0, len(self.qids), BATCH_ROWS):
            stop = min(start + BATCH_ROWS, len(self.qids))
            lines = pc.binary_join_element_wise(
                self.qids[start:stop], "Q0", self.docnos[start:stop],
                pc.cast(pa.array(self.ranks[start:stop]), pa.string()),
                _float_text(self.scores[start:stop].astype(np.float64)), " ")
            lines = pc.binary_join_element_wise(lines, end, "")
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + len(lines) + 1]
            file.write(memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]])


def trec_rows(table: pa.Table, tag: str = "tessera") -> TrecRows:
    """The lines of ``trec_run`` (refusing what a TREC run cannot hold), before anything is written."""
    missing = [c for c in ("qid", "docno") if c not in table.column_names]
    if missing or not {"rank", "score"} & set(table.column_names):
        raise SpecError(f"a TREC run needs the columns qid, docno and rank or score; the result has "
                        f"{one_line(table.column_names, 160)}", field="out")
    tag = "_".join(str(tag).split()) or "tessera"
    qids = _as_text(table.column("qid")).fill_null("None")
    docnos = _as_text(table.column("docno")).fill_null("None")
    if "doc_id" in table.column_names:
        docnos = pc.coalesce(_as_text(table.column("doc_id")), docnos)
    for what, values in (("qid", qids), ("docno", docnos)):
        _check_ids(values, what)
    scores = (_floats(table.column("score"), np.nan) if "score" in table.column_names
              else np.full(table.num_rows, np.nan))
    if "rank" in table.column_names:
        ranks = _floats(table.column("rank"), np.inf)
    else:
        ranks = -np.nan_to_num(scores, nan=-np.inf)  # by score, descending
    order = pc.sort_indices(pa.table({"qid": qids, "rank": ranks}), [("qid", "ascending"), ("rank", "ascending")])
    qids, docnos = qids.take(order), docnos.take(order)
    if "doc_id" in table.column_names:  # chunks: each document where its best chunk is
        first = pa.table({"qid": qids, "docno": docnos, "at": np.arange(len(qids))}).group_by(
            ["qid", "docno"], use_threads=False).aggregate([("at", "min")]).column("at_min")
        keep = np.sort(first.to_numpy())
        order, qids, docnos = order.take(keep), qids.take(keep), docnos.take(keep)
    n = len(qids)
    starts = np.flatnonzero(np.r_[True, pc.not_equal(qids[1:], qids[:-1]).to_numpy(zero_copy_only=False)]
                            if n else np.zeros(0, bool))
    first_of_qid = np.zeros(n, bool)
    first_of_qid[starts] = True
    group = np.cumsum(first_of_qid) - 1
    at = np.arange(n) - starts[group] if n else np.zeros(0, np.int64)
    own = scores[order.to_numpy()]
    no_score = np.add.reduceat(np.isnan(own), starts) > 0 if n else np.zeros(0, bool)
    own = np.where(no_score[group], -(at + 1), own).astype(np.float32)
    return TrecRows(qids, docnos, at + 1, _strictly_decreasing(own, group, at), tag)


def _strictly_decreasing(own: np.ndarray, group: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Each float32 score that ties with (or is above) the one written before it in its qid, nudged to the float32
    just below that one (``np.nextafter`` towards -inf); the others as they are.

    On float32s mapped to integers in their order (-0.0 and 0.0 alike, one float32 step = 1), the rule is
    ``w[j] = min(own[j], w[j-1] - 1)``, so ``w[j] + j`` is the running minimum of ``own[j] + j``: one
    ``np.minimum.accumulate``, each qid's values shifted below the ones before it so that the minimum restarts."""
    bits = own.view(np.int32).astype(np.int64)
    key = np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))
    bottom = -0x7F800000  # -inf: nextafter(-inf, -inf) stays -inf
    shift = group.astype(np.int64) << 34
    written = np.maximum(np.minimum.accumulate(key + at - shift) + shift - at, bottom)
    out = np.where(written >= 0, written, (-written) | 0x80000000).astype(np.uint32).view(np.float32)
    return np.where(written == key, own, out)  # kept: its own bits (-0.0 stays -0.0)


def trec_run(table: pa.Table, tag: str = "tessera") -> str:
    """The ranking of a result table as a TREC run: ``qid Q0 docno rank score tag`` a line, by qid then rank.

    trec_eval and ir-measures order a query's documents by score (ties: by docno, descending), not by the rank
    column, and trec_eval holds a score as a 32-bit float. So the scores are written as 32-bit floats that
    decrease strictly with Tessera's rank: where a score ties with (or is above) the one ranked before it, as
    32-bit floats, it is nudged just below that one (by the smallest float32 step), and a query with a missing
    score gets ``-rank``. Evaluating the file then sees Tessera's order. A result without ``rank`` is ranked by
    ``score`` within each query; the rank written is 1, 2, ... in that order.

    Qrels judge documents, not chunks: a result whose rows are chunks (a ``doc_id`` that is not the row's
    ``docno``) is written one line per document, its ``doc_id``, where its best chunk is ranked (max-passage).

    A file is better written with ``trec_rows(table, tag).write(file)``, which never holds the whole text.
    """
    buffer = io.BytesIO()
    trec_rows(table, tag).write(buffer)
    return buffer.getvalue().decode("utf-8")
