"""What every step's output keeps of the long tables' data model, checked after each call (``Operator.check_output``).

Why: a plugin operator that turns ``qid`` into integers, drops it, writes ``rank`` as ``int64`` or adds rows for a
query it was not given runs on silently, and the flow shows wrong queries or fails in a later step that is not at
fault. These checks read the schema and, in query scope, the qids; a column a step passes through as it came in is
never refused (its type is the step above's or the caller's), only one the step wrote or changed.
"""

from __future__ import annotations

import inspect

import pyarrow as pa
import pyarrow.compute as pc

from operators.tables import shown_columns

#: The types of the core columns (DESIGN.md, "Data"). Fusion, the union of Ray blocks and the step cache need
#: one type per column: ``large_string`` or ``float32`` in one batch changes (or breaks) the union with the next.
CORE_COLUMN_TYPES = {"qid": pa.string(), "query": pa.string(), "docno": pa.string(), "text": pa.string(),
                     "score": pa.float64(), "rank": pa.int32()}
_TEXT_COLUMNS = ("qid", "query", "docno", "text")
_RANKING_ROLES = ("score", "rank")
_TYPE_NAMES = {pa.float64(): "float64", pa.int32(): "int32", pa.string(): "string"}


def expected_column_type(column: str, role: str | None = None) -> pa.DataType | None:
    """The type ``column`` must have: a core column's, a column declared with the ``score`` or ``rank`` role
    (``{"ce_score": "score"}``: sorted, fused and cut by number like ``score``), or a ranking step's
    ``score_<step>``/``rank_<step>`` copy's (unless declared with another role); None when the data model leaves it
    open."""
    if column in CORE_COLUMN_TYPES:
        return CORE_COLUMN_TYPES[column]
    if role in _RANKING_ROLES:
        return CORE_COLUMN_TYPES[role]
    for kind in _RANKING_ROLES:
        if column.startswith(f"{kind}_") and role is None:
            return CORE_COLUMN_TYPES[kind]
    return None


def repeated_columns(table: pa.Table, out: pa.Table) -> str | None:
    """Why ``out`` holds a column name more often than ``table`` did (``table.append_column`` of a name it has, where
    ``set_column`` was meant), or None: such a table printed, cached and joined as an internal ``KeyError``, or was
    written to a file with both."""
    names = out.column_names
    repeated = sorted({n for n in names if names.count(n) > max(1, table.column_names.count(n))})
    if not repeated:
        return None
    return (f"transform returned column(s) {', '.join(repr(n) for n in repeated)} more than once: "
            "table.append_column adds a column beside the one of that name; operators.tables.set_column(table, name, "
            "values) replaces it")


def output_breach(scope: str, roles: dict[str, str], table: pa.Table, out: pa.Table) -> str | None:
    """Why ``out`` (what a step of ``scope``, declaring ``roles`` in ``produces()``, returned for ``table``) breaks
    the data model, or None. A source step's batches (``Source.read_checked``) only by their core columns' types and
    those of its declared score and rank columns: it reads its own rows, so it keeps no qid of an input."""
    if scope == "source":
        return _type_breach(roles, table, out, writer="read() yielded")
    if "qid" in table.column_names and "qid" not in out.column_names:
        return (f"transform dropped the 'qid' column (output has {shown_columns(out)}); every step keeps the qid of "
                "each row, so the steps after it and the result know which query a row answers")
    if problem := _type_breach(roles, table, out) or _rank_breach(roles, out):
        return problem
    if scope == "query" and "qid" in table.column_names and out.num_rows:
        unknown = set(pc.unique(out.column("qid")).to_pylist()) - set(pc.unique(table.column("qid")).to_pylist())
        if unknown:
            shown = ", ".join(repr(q) for q in sorted(unknown, key=str)[:5])
            return (f"transform returned rows for {len(unknown)} qid(s) it was not given ({shown}); a query-scope "
                    "step gets whole queries and answers those (a step that adds queries has scope 'row', as "
                    "query.expand does)")
    return None


def _rank_breach(roles: dict[str, str], out: pa.Table) -> str | None:
    """Why a rank column the step declares holds a rank below 1 (numbered from 0, as ``enumerate`` does): shown as
    rank 0 by ``tessera run``, and read as better than rank 1 by whatever reduces or fuses by rank after it."""
    for name in roles:
        if name not in out.column_names or expected_column_type(name, roles[name]) != CORE_COLUMN_TYPES["rank"]:
            continue
        lowest = pc.min(out.column(name)).as_py() if out.num_rows else None
        if lowest is not None and lowest < 1:
            return (f"transform wrote '{name}' {lowest}: ranks start at 1 within each qid (enumerate(rows, start=1)); "
                    "operators.tables.set_ranking numbers them")
    return None


def with_string_text(table: pa.Table, out: pa.Table) -> pa.Table:
    """``out`` with the core text columns a step wrote as ``large_string`` (or ``string_view``) cast to ``string``:
    the same text in the data model's type, so a result's types do not depend on whether a step came from the cache
    (which stores ``string``) or ran. A column that keeps its input's type is left as it came (the caller's)."""
    for name in _TEXT_COLUMNS:
        if len(out.schema.get_all_field_indices(name)) != 1:  # absent, or twice (check_output refuses that)
            continue
        kind = out.schema.field(name).type
        kept = table.schema.get_field_index(name) >= 0 and table.schema.field(name).type == kind
        if not kept and (pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
            out = out.set_column(out.column_names.index(name), name, out.column(name).cast(pa.string()))
    return out


def _type_breach(roles: dict[str, str], table: pa.Table, out: pa.Table, writer: str = "transform wrote"
                 ) -> str | None:
    before = table.schema
    for field in out.schema:
        if before.get_field_index(field.name) >= 0 and before.field(field.name).type == field.type:
            continue  # passed through as it came in
        if field.name in _TEXT_COLUMNS:
            if pa.types.is_string(field.type):
                continue
            expected = CORE_COLUMN_TYPES[field.name]
        else:
            expected = expected_column_type(field.name, roles.get(field.name))
            if expected is None or field.type == expected:
                continue
        return _wrong_type(field, expected, roles.get(field.name), out, writer)
    return None


def _wrong_type(field: pa.Field, expected: pa.DataType, role: str | None, out: pa.Table, writer: str) -> str:
    """The step's column of another type: what it wrote (with the first value where that shows the slip: a score
    as text ``'0.93'``, a rank as ``1.0``), what the data model wants and the line that writes it so. No text
    column's value is shown (a document's can be long or private)."""
    name, kind = field.name, field.type
    written, why = f"{kind}", ""
    as_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if expected != pa.string() and (as_text or pa.types.is_floating(kind) and pa.types.is_integer(expected)):
        first = out.column(name).drop_null()
        value = repr(first[0].as_py()) if len(first) else ""
        written += f" ({value})" if value and len(value) <= 24 else ""
        why = " (numbers as text sort '10' before '9')" if as_text else ""
    ranking_name = name in _RANKING_ROLES or name.split("_")[0] in _RANKING_ROLES
    declared = f" (declared with the role '{role}')" if role in _RANKING_ROLES and not ranking_name else ""
    ranking = " (operators.tables.set_ranking writes score and rank)" if ranking_name and expected != pa.string() \
        else ""
    batch = " (on an empty batch)" if out.num_rows == 0 else ""
    return (f"{writer} a column of another type than the data model's: '{name}'{declared} is {written}, "
            f"expected {expected}{batch}{why}; write it as pa.array(values, pa.{_TYPE_NAMES[expected]}())"
            f"{ranking}")


def table_hint(value: object) -> str:
    """How to make a pyarrow Table of ``value``, what a first try passes or returns instead (``Operator``'s errors):
    a pandas or polars DataFrame, a dict of columns, a list of row dicts, a record batch, one column."""
    if type(value).__name__ == "DataFrame":
        if type(value).__module__.split(".")[0] == "polars":
            return " (convert it with df.to_arrow())"
        return " (convert it with pa.Table.from_pandas(df, preserve_index=False))"
    if isinstance(value, dict):
        return " (pa.table(columns) makes one of a dict of columns)"
    if isinstance(value, list):
        return " (pa.Table.from_pylist(rows) makes one of a list of row dicts)"
    if isinstance(value, pa.RecordBatch):
        return " (pa.Table.from_batches([batch]) makes one of it)"
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return " (that is one column: operators.tables.set_column(table, name, values) adds it to the table)"
    return ""


def returned_hint(out: object) -> str:
    """``table_hint`` for what ``transform`` returned, and the two slips of writing one: no ``return`` (None) and a
    ``yield`` (a generator, as a source's ``read`` is)."""
    if out is None:
        return "None, not a pyarrow Table (transform returns the table it made: is its return missing?)"
    if inspect.isgenerator(out):
        return ("a generator, not a pyarrow Table (transform yields: it returns one table; only a source's "
                "read(split) yields tables)")
    return f"a {type(out).__name__}, not a pyarrow Table{table_hint(out)}"


def document_breach(out: pa.Table) -> str | None:
    """Why a batch a source's ``read()`` yielded for ``tessera ingest`` is no documents (``docno, text``, a
    ``title`` as text, metadata), or None; its core columns' types are ``output_breach``'s. A plugin source
    without ``text`` failed as the index's "chunks lack column(s) ['text']", one without ``docno`` as an internal
    ``KeyError``, and an int title was stored as one. A batch that read nothing (no columns) is none."""
    if not out.column_names:
        return None
    if missing := [name for name in ("docno", "text") if name not in out.column_names]:
        return (f"read() yielded no {' nor '.join(repr(m) for m in missing)} column (it has {shown_columns(out)}); "
                "tessera ingest reads documents: 'docno' (the id, text) and 'text', with 'title' and metadata "
                "beside them (operators.tables.set_column(table, 'text', values), or table.rename_columns)")
    if "title" in out.column_names:
        field = out.schema.field("title")
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_null(field.type)):
            return _wrong_type(field, pa.string(), None, out, "read() yielded")
    return None
