"""Row-wise LLM steps: one call per row, written as two functions that the gateway and ``ray.data.llm`` share.

A row-wise step says what to ask for a row (``messages``) and what a reply makes of it
(``apply``); it never calls the model itself. ``transform`` is the gateway path (the
local executor, and the Ray executor's CPU actors): it sends every row's messages
through ``ask`` and applies the replies. On GPUs the Ray executor feeds the same two
functions to ``ray.data.llm``'s vLLM processor instead (``flows/executors/ray_llm.py``),
so both paths write the same columns from the same replies.

Usage::

    class Shout(RowwiseLLMStep):
        name = "analyze.shout"
        prompt_template = "Repeat in capitals: {text}"
        prompt_fields = ("text",)
        class Params(LLMParams):
            input_column: str = "text"
        def produces(self): return {"shout": "text"}
        def messages(self, row): return self.render(text=row["text"]) if row["text"] else None
        def apply(self, row, reply):
            problem = None if reply is None else junk_reason(reply)
            return {"shout": row["text"] if reply is None or problem else reply.text}, problem
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from operators.llm.gateway import Completion, LLMError
from operators.llm.step import LLMStep
from operators.tables import set_column, text_column

Reply = Completion | LLMError


class RowwiseLLMStep(LLMStep):
    """Base of the LLM steps that call once per row (not registered: it has no name); see the module docstring.

    Its ``Params`` have an ``input_column``; every column ``produces`` names is a string column that ``apply``
    fills for each row."""

    def messages(self, row: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The chat messages for one row (its ``reads()`` columns, and ``docno`` when present); None: not sent."""
        raise NotImplementedError

    def apply(self, row: dict[str, Any], reply: Reply | None) -> tuple[dict[str, Any], str | None]:
        """The row's output columns from the model's ``reply`` (None: the row was not sent), and why the reply
        could not be used (None when it was, or nothing was asked)."""
        raise NotImplementedError

    def row_columns(self, table: pa.Table) -> list[str]:
        """The columns ``messages`` and ``apply`` see: what the step reads, and ``docno`` to name a row."""
        return [c for c in dict.fromkeys([*self.reads(), "docno"]) if c in table.column_names]

    def transform(self, table: pa.Table) -> pa.Table:
        text_column(table, self.params.input_column, op=self.name, step=self.step_id)  # names a missing column
        rows = table.select(self.row_columns(table)).to_pylist()
        asked = {i: m for i, row in enumerate(rows) if (m := self.messages(row)) is not None}
        replies = self.ask(asked, qids={i: str(rows[i]["qid"]) for i in asked})
        outputs: dict[str, list] = {name: [] for name in self.produces()}
        position: dict[str, int] = {}
        for i, row in enumerate(rows):
            qid = str(row["qid"])
            position[qid] = position.get(qid, 0) + 1
            values, problem = self.apply(row, replies.get(i))
            if problem is not None:
                self.degrade(qid, f"row {row.get('docno') or '#' + str(position[qid])}: {problem}")
            for name, column in outputs.items():
                column.append(values[name])
        for name, column in outputs.items():
            table = set_column(table, name, pa.array(column, pa.string()))
        return table
