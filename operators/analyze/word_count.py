"""Word count chip."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import set_column


class WordCounter(Operator):
    """Count the words of a text column and show the count as a chip.

    Words are runs of non-whitespace characters (Unicode whitespace, as ``str.split``).

    Usage::

        WordCounter({"input_column": "text"})(pa.table({"text": ["a b", "c"]}))
        # word_count: [2, 1]
    """

    name = "analyze.word_count"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        input_column: str = Field("text", description="Column whose words are counted.")
        output_column: str = Field("word_count", description="Column that receives the count.")

    def reads(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "chip"}

    def transform(self, table: pa.Table) -> pa.Table:
        text = pc.fill_null(table.column(self.params.input_column).cast(pa.string()), "")
        counts = pc.list_value_length(pc.utf8_split_whitespace(pc.utf8_trim_whitespace(text)))
        counts = pc.if_else(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0), 0, counts)
        return set_column(table, self.params.output_column, counts.cast(pa.int32()))
