"""Which rows a step was given when its code raised, for the ``OperatorError`` that names the step.

Why: a plugin's ``transform`` that failed on one query of a thousand was named by its step and its line, but not by
the rows that made it fail, so its author reran everything to find them. The message names the batch's queries (a
few qids, then how many more) or, without a ``qid`` column, how many rows and the first ``docno``: enough to rerun
just those. Ids only, never a row's text (it can be long or private).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

#: The qids a message names before 'and N more'.
SHOWN_QUERIES = 3
#: An id longer than this is cut (an id, not a text: a qid made of a query's words stays short in the message).
SHOWN_ID_CHARS = 40


def _shown(value: object) -> str:
    text = str(value)
    return repr(text if len(text) <= SHOWN_ID_CHARS else text[:SHOWN_ID_CHARS] + "...")


def failed_batch(table: pa.Table) -> str:
    """``; its batch held queries '1', '7', '9' and 4 more`` (or ``12 rows, the first docno 'd3'``): what to
    rerun to see the error again."""
    if "qid" in table.column_names and table.num_rows:
        qids = pc.unique(table.column("qid")).drop_null().to_pylist()
        if qids:
            shown = ", ".join(_shown(q) for q in qids[:SHOWN_QUERIES])
            more = f" and {len(qids) - SHOWN_QUERIES} more" if len(qids) > SHOWN_QUERIES else ""
            return f"; its batch held {'query' if len(qids) == 1 else 'queries'} {shown}{more}"
    rows = f"{table.num_rows} row{'' if table.num_rows == 1 else 's'}"
    if "docno" in table.column_names and table.num_rows:
        first = table.column("docno")[0].as_py()
        if first is not None:
            return f"; its batch held {rows}, the first docno {_shown(first)}"
    return f"; its batch held {rows}"
