"""Numbered citations for the documents an answer used, formatted by the kind of source."""

from __future__ import annotations

from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import concat, qid_groups, set_column
from operators.unicode import whole_characters

Kind = Literal["pdf", "web", "web_search", "docs", "text"]


class ReferenceBuilder(Operator):
    """Turn each query's cited rows into numbered citations: PDF, web page, web search result, document or text.

    A row's number is its document number in the context (``[i]`` in the answer), so
    the answer's citations and the list agree. With ``kind: auto`` each row's kind comes
    from its columns: a URL with a search snippet is a web search result, a URL alone a
    web page, a path ending in ``.pdf`` or a page number a PDF, another path a document,
    anything else plain text (titled by its title, else its docno). Each citation goes
    into ``output_column`` of its row (null for rows not cited) and, in order, into the
    query's ``references`` metadata. Rows are kept.

    Usage::

        ReferenceBuilder()(answered)   # reference column; metadata references: ["[1] Honey bee (d12)", ...]
    """

    name = "generate.references"
    aliases = ("BuildReference", "build_references")
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kind: Literal["auto", "pdf", "web", "web_search", "docs", "text"] = Field(
            "auto", description="How every row is cited; 'auto' decides per row from its columns.")
        only_cited: bool = Field(True, description="Cite only the rows the answer cited (cited_column); false cites "
                                 "every row of the context. Without cited_column every numbered row is cited.")
        number_column: str = Field("context_index", description="Column holding each row's document number; rows "
                                   "where it is null are not cited. Without the column, rows are numbered by rank.")
        cited_column: str = Field("cited", description="Column saying whether the answer cited the row.")
        title_column: str = Field("title", description="Column holding the title.")
        url_column: str = Field("url", description="Column holding a web address.")
        path_column: str = Field("path", description="Column holding a file path.")
        page_column: str = Field("page", description="Column holding a PDF page number.")
        snippet_column: str = Field("snippet", description="Column holding a web search result's snippet.")
        output_column: str = Field("reference", description="Column that receives each cited row's citation.")

    def reads(self) -> list[str]:
        p = self.params
        return ["qid", "docno", p.number_column, p.cited_column, p.title_column, p.url_column, p.path_column,
                p.page_column, p.snippet_column]

    def requires(self) -> list[str]:
        return ["qid", "docno"]

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "data"}

    def metadata_keys(self) -> frozenset[str]:
        return frozenset({"references"})

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return set_column(table, self.params.output_column, pa.array([], pa.string()))
        out = []
        for qid, rows in qid_groups(table):
            records = rows.to_pylist()
            numbers = self._numbers(rows, records)
            cited = [(n, i) for i, n in enumerate(numbers) if n is not None]
            texts: list[str | None] = [None] * len(records)
            for n, i in sorted(cited):
                texts[i] = f"[{n}] {self.cite(records[i])}"
            self.emit_metadata(qid, "references", [texts[i] for _, i in sorted(cited)])
            out.append(set_column(rows, self.params.output_column, pa.array(texts, pa.string())))
        return concat(out)

    def _numbers(self, rows: pa.Table, records: list[dict[str, Any]]) -> list[int | None]:
        p = self.params
        if p.number_column in rows.column_names:
            numbers = [r[p.number_column] for r in records]
        else:
            ranks = [r.get("rank") for r in records]
            order = sorted(range(len(records)), key=lambda i: (ranks[i] is None, ranks[i] or 0))
            numbers = [0] * len(records)
            for n, i in enumerate(order, 1):
                numbers[i] = n
        if p.only_cited and p.cited_column in rows.column_names:
            numbers = [n if r[p.cited_column] else None for n, r in zip(numbers, records)]
        return numbers

    def kind_of(self, row: dict[str, Any]) -> Kind:
        p = self.params
        if p.kind != "auto":
            return p.kind
        url, path = row.get(p.url_column), str(row.get(p.path_column) or "")
        if url:
            return "web_search" if row.get(p.snippet_column) else "web"
        if path.lower().endswith(".pdf") or row.get(p.page_column) is not None:
            return "pdf"
        return "docs" if path else "text"

    def cite(self, row: dict[str, Any]) -> str:
        """One row's citation, without its number."""
        p = self.params
        title = str(row.get(p.title_column) or row.get("docno") or "untitled")
        url, path, page = row.get(p.url_column), row.get(p.path_column), row.get(p.page_column)
        kind = self.kind_of(row)
        if kind == "pdf":
            where = ", ".join(str(x) for x in (path, f"p. {page}" if page is not None else None) if x)
            return f"{title} (PDF{', ' + where if where else ''})"
        if kind == "web":
            return f"{title}. {url or ''}".strip()
        if kind == "web_search":
            snippet = " ".join(str(row.get(p.snippet_column) or "").split())
            snippet = snippet if len(snippet) <= 120 else whole_characters(snippet, 119) + "…"
            return f"{title}. {url or ''} (search result: \"{snippet}\")"
        if kind == "docs":
            return f"{title} ({path})" if path else title
        return f"{title} ({row.get('docno')})" if row.get(p.title_column) else title
