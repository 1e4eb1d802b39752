"""The query forms ``Flow.run`` takes beyond a list and a table, as ``as_queries`` reads them: a pandas Series and a
dict (``{qid: text}`` or a table's columns). Kept apart from ``flows.api`` so that module stays the API itself."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from operators.errors import SpecError, short_repr


def series_queries(series: Any) -> "list | dict":
    """A pandas Series as queries: ``{qid: text}`` by its index, as a dict is, or a list (qids 1, 2, ...) when its
    index is the default ``0, 1, ...`` that a Series of a list has."""
    import pandas as pd

    index = series.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1 and index.name is None:
        return series.tolist()
    return {"qid": index.tolist(), "query": series.tolist()}  # a table's columns: a qid given twice is refused


def dict_queries(queries: dict) -> pa.Table:
    """A queries table of ``{qid: text}`` (how BEIR's ``GenericDataLoader`` and pytrec_eval hold queries), in the
    dict's order; a dict with keys ``qid`` and ``query`` is a table's columns. ``as_queries`` checks the rest."""
    if "qid" in queries and "query" in queries:
        if scalar := next((k for k, v in queries.items() if isinstance(v, (str, bytes)) or not hasattr(v, "__len__")),
                          None):
            raise SpecError(f"a dict with keys qid and query is read as a table's columns, so each is a list; "
                            f"{scalar}: {type(queries[scalar]).__name__} {short_repr(queries[scalar])}. One query by "
                            f"its qid is {{qid: text}}", field="queries")
        from flows.executors.base import mixed_column

        try:
            return pa.table(queries)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
            raise mixed_column({k: list(v) for k, v in queries.items()}) \
                or SpecError(f"the dict's columns do not make a table: {err}", field="queries") from None
    if wrong := next(((qid, text) for qid, text in queries.items() if not isinstance(text, str)), None):
        columns = f"; a dict of columns needs keys qid and query, got {list(queries)}" \
            if isinstance(wrong[1], (list, tuple)) else ""
        raise SpecError(f"a dict of queries maps each qid to its text; qid {short_repr(wrong[0])} has "
                        f"{type(wrong[1]).__name__} {short_repr(wrong[1])}{columns}", field="queries")
    try:
        qids = pa.array(list(queries))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise SpecError(f"a dict of queries has qids of mixed types: {short_repr(list(queries))}; give text "
                        f"(or whole numbers)", field="queries") from None
    return pa.table({"qid": qids, "query": pa.array(list(queries.values()), pa.string())})


def record_queries(queries: Any) -> Any:
    """A list of dicts, one per query (``[{"qid": "q1", "query": "..."}]``, as ``ingest`` takes documents), as the
    table of its fields, which ``as_queries`` checks (``qid`` and ``query``, or the rename); anything else as given.
    It was refused: ``query 1 of 1 is {...} (dict), not text``."""
    if not isinstance(queries, (list, tuple)) or not queries or not all(isinstance(q, dict) for q in queries):
        return queries
    columns = {name: [q.get(name) for q in queries] for name in dict.fromkeys(k for q in queries for k in q)}
    return dict_queries(columns) if "qid" in columns and "query" in columns else pa.table(
        {name: pa.array([None if v is None else str(v) for v in values], pa.string())
         for name, values in columns.items()})  # (only its column names are read, to say what it lacks)


def refuse_file(queries: Any) -> None:
    """A path given as queries: a ``pathlib.Path`` was refused as no query form, and a text naming a queries file
    that exists (``"queries.jsonl"``) was searched for as one query's text, the file unread (``tessera run
    --queries`` reads it); both now say to read it with ``read_queries``."""
    import os
    from pathlib import Path

    from flows.queries import looks_like_path

    if isinstance(queries, os.PathLike):
        named = os.fspath(queries)
    elif isinstance(queries, str) and looks_like_path(queries):
        try:
            named = queries if Path(queries.strip()).expanduser().is_file() else None
        except (OSError, RuntimeError):  # a name too long for a path; ~word, no user's
            named = None
    else:
        named = None
    if named is not None:
        raise SpecError(f"queries {named!r} is a file's name: Flow.run takes the queries themselves; read the file "
                        f"first, flow.run(read_queries({named!r})) (from flows.queries import "
                        f"read_queries), as tessera run --queries does", field="queries")
