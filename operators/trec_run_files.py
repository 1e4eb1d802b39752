"""Read a TREC run file (``qid Q0 docno rank score tag`` a line) into a Tessera result table. Why a reader of our
own: ``write_results(table, "run.trec")`` writes such a file, and a run made elsewhere (Anserini's BM25) comes as
one; ir-measures' ``read_trec_run`` reads one but fails on a bad line with a bare ``ValueError`` (``could not
convert string to float: 'abc'``) that names neither the file nor the line. Here each refusal names ``FILE:LINE``.

The rows are ordered as trec_eval and ir-measures evaluate them: by score, descending, and tied scores by docno,
descending; ``rank`` is 1, 2, ... in that order (the file's own rank column is not what they read). Ids stay text,
so ``001`` and ``1`` are two qids, as trec_eval compares them."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from operators.errors import SpecError
from operators.tables import group_ranks

_FORMAT = "a TREC run line is 'qid Q0 docno rank score tag' (6 columns)"


def read_trec_run(path: str | Path) -> pa.Table:
    """The run in ``path`` as a table of ``qid, docno, rank, score, tag`` (qid, docno and tag text; rank int32;
    score float64), by qid as the file first gives them, then in trec_eval's order within each. Blank lines are
    skipped. A line of another width, a score that is not a finite number, a rank that is not a whole number, a
    document listed twice for one query, and a file that is not UTF-8 are ``SpecError`` s naming ``FILE:LINE``."""
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SpecError(f"cannot read the run file {path}: {err.strerror or err}", field="run") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SpecError(f"{path}:{line}: the run file is not UTF-8 (byte {data[err.start]:#04x}): save it as "
                        f"UTF-8", field="run") from None
    qids, docnos, scores, tags, seen, order = [], [], [], [], {}, {}
    for number, line in enumerate(text.splitlines(), 1):
        cells = line.split()
        if not cells:
            continue
        at = f"{path}:{number}"
        if len(cells) != 6:
            raise SpecError(f"{at}: {_FORMAT}; this one has {len(cells)}: {line.strip()[:120]!r}", field="run")
        qid, _, docno, rank, score, tag = cells
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise SpecError(f"{at}: the score (column 5) is {score!r}, not a number: {_FORMAT}", field="run")
        if not _whole(rank):
            raise SpecError(f"{at}: the rank (column 4) is {rank!r}, not a whole number: {_FORMAT}", field="run")
        if (qid, docno) in seen:
            raise SpecError(f"{at}: query {qid!r} lists document {docno!r} again (first at line "
                            f"{seen[qid, docno]}); trec_eval refuses a run with a document twice for one query: "
                            f"keep its best line", field="run")
        seen[qid, docno] = number
        order.setdefault(qid, len(order))
        qids.append(qid)
        docnos.append(docno)
        scores.append(value)
        tags.append(tag)
    table = pa.table({"qid": pa.array(qids, pa.string()), "docno": pa.array(docnos, pa.string()),
                      "score": pa.array(scores, pa.float64()), "tag": pa.array(tags, pa.string()),
                      "_first": pa.array([order[q] for q in qids], pa.int64())})
    table = table.take(pc.sort_indices(table, [("_first", "ascending"), ("score", "descending"),
                                               ("docno", "descending")]))
    ranks = group_ranks(table.column("_first").to_numpy())  # 1, 2, ... within each qid, as set_ranking numbers them
    return table.drop_columns(["_first"]).add_column(2, "rank", ranks)


def _whole(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
