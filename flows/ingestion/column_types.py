"""Metadata columns whose types do not merge across a source: kept as text in every shard a staging run writes.

A shard's tables are concatenated, and the index merges its shards' columns, by pyarrow's permissive promotion,
which merges integers with floats but a number with no text: a field that is a number in one file (or batch) and
text in the next (``"year": 1999``, then ``"year": "unknown"``) stopped staging with Arrow's 'Unable to merge'.
Such a column becomes text (``1999`` is ``"1999"``, a list its JSON text), in the tables
met after it, in the shard being cut and in the shards the run staged before; as a JSONL field whose values mix
types within one batch is (``sources._common.values_to_array``). Dictionary columns (Parquet) are decoded to their
values, which merge with plain ones.
"""

from __future__ import annotations

import pyarrow as pa

from operators.metadata_columns import CHUNK_COLUMNS, RANKING_PREFIXES
from operators.sources._common import column_as_text

#: The document's own columns: the sources make them text already.
_OWN = ("docno", "title", "text")
#: Columns the ingest makes itself (``shards.prepare`` and its ``INTERNAL``, the chunker): a source's field of one of
#: these names is left out (staging names it in a warning); a crawl's ``_error`` field failed its document.
OWN_COLUMNS = ("_shard", "_shard_rows", "_error", "_stage", "_pieces", "doc_id", *sorted(CHUNK_COLUMNS))
#: Columns a search writes into each result row (the index its vectors): a source's field of one of these names was
#: stored, then replaced in every result (a document's ``score: 5`` shown as its BM25 score) or dropped without a
#: word (``vector``); left out like ``OWN_COLUMNS``, as front matter and the service's documents refuse them.
SEARCH_COLUMNS = ("qid", "query", "rank", "score", "vector")
#: A source's fields that ingestion leaves out (``shards.prepare``), named in staging's warning.
LEFT_OUT_COLUMNS = (*OWN_COLUMNS, *SEARCH_COLUMNS)
#: ``LEFT_OUT_COLUMNS`` and the prefixes it leaves out too, for a message.
LEFT_OUT_RULE = ", ".join((*LEFT_OUT_COLUMNS, *(f"{prefix}*" for prefix in RANKING_PREFIXES)))


def left_out(name: str) -> bool:
    """Whether ingestion leaves out a source's field so named: one of ``LEFT_OUT_COLUMNS``, or a ranking step's
    ``score_<step>``/``rank_<step>`` (``metadata_columns.RANKING_PREFIXES``), which a search writes in the data
    model's types: a ``score_bm25: 5`` stored as an integer failed every search of the index."""
    return name in LEFT_OUT_COLUMNS or name.startswith(RANKING_PREFIXES)


def merged_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type pyarrow's permissive promotion merges ``a`` and ``b`` to, or None when it merges them to none."""
    try:
        schema = pa.unify_schemas([pa.schema([("x", a)]), pa.schema([("x", b)])], promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    return schema.field("x").type


def as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The values as text, nulls null: Arrow's cast where there is one (``1999``), else each value's JSON text (a
    list, a struct), as the sources make a text column of them (``column_as_text``)."""
    return column_as_text(column)


def _is_text(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


class ColumnTypes:
    """The type each metadata column has taken so far in one staging run, and the columns made text."""

    def __init__(self) -> None:
        self.types: dict[str, pa.DataType] = {}
        self.text: set[str] = set()

    def fit(self, table: pa.Table) -> pa.Table:
        """``table`` with its dictionary columns decoded and its columns made text where their type does not
        merge with the type the column had before (or was made text before)."""
        for i, field in enumerate(table.schema):
            column = table.column(i)
            if pa.types.is_dictionary(field.type):
                column = column.cast(field.type.value_type)
                table = table.set_column(i, field.name, column)
            if field.name in _OWN or pa.types.is_null(column.type):
                continue
            known = self.types.get(field.name)
            merged = column.type if known is None else merged_type(known, column.type)
            if merged is None:
                self.text.add(field.name)
            if field.name in self.text:
                self.types[field.name] = pa.string()
                if not _is_text(column.type):
                    table = table.set_column(i, field.name, as_text(column))
            else:
                self.types[field.name] = merged
        return table

    def needs_text(self, schema: pa.Schema) -> bool:
        """Whether a table of ``schema`` staged earlier holds a column made text since in another type."""
        return any(f.name in self.text and not _is_text(f.type) and not pa.types.is_null(f.type) for f in schema)
