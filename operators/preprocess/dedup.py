"""Document deduplication."""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.ids import content_key

logger = logging.getLogger(__name__)


class Deduplicator(Operator):
    """Drop duplicate documents, keeping the first occurrence of each, in input order.

    ``key="docno"`` compares ids; ``key="content"`` compares the whole title and text
    after normalisation (NFKC, case-folded, whitespace collapsed), through an MD5 of
    them. Rows whose key is null (no id) are all kept. The number of rows dropped is
    logged.

    Usage::

        Deduplicator({"key": "content"})(pa.table({"docno": ["a", "b"], "text": ["Same  text", "same text"]}))
        # keeps row "a"
    """

    name = "preprocess.dedup"
    scope = "corpus"
    batch_size = None

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        key: Literal["docno", "content"] = Field(
            "docno", description="Compare document ids, or the normalised title + text."
        )
        id_column: str = Field("docno", min_length=1, description="Column holding the id, for `key: docno`.")
        text_column: str = Field("text", min_length=1, description="Column holding the text, for `key: content`.")
        title_column: str = Field(
            "title", min_length=1, description="Column holding the title, for `key: content` (used when present)."
        )

    def reads(self) -> None:
        return None  # kept rows carry every column

    def requires(self) -> list[str]:
        return [self.params.id_column if self.params.key == "docno" else self.params.text_column]

    def _keys(self, table: pa.Table) -> pa.Array:
        p = self.params
        if p.key == "docno":
            column = table.column(p.id_column)
            return (column.combine_chunks() if column.num_chunks else pa.array([], column.type)).cast(pa.string())
        texts = table.column(p.text_column).to_pylist()
        titles = table.column(p.title_column).to_pylist() if p.title_column in table.column_names else None
        titles = titles or [None] * len(texts)
        return pa.array([content_key(title, text) for title, text in zip(titles, texts)], pa.string())

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return table
        codes = pc.dictionary_encode(self._keys(table)).indices  # codes follow first appearance
        valid = codes.is_valid().to_numpy(zero_copy_only=False)
        values = codes.fill_null(-1).to_numpy(zero_copy_only=False)
        _, first = np.unique(values[valid], return_index=True)
        keep = np.sort(np.r_[np.flatnonzero(valid)[first], np.flatnonzero(~valid)])
        dropped = table.num_rows - len(keep)
        if dropped:
            logger.info("%s [%s]: dropped %d duplicate(s) of %d rows by %s",
                        self.name, self.step_id, dropped, table.num_rows, self.params.key)
            return table.take(pa.array(keep, pa.int64()))
        return table
