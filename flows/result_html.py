"""A flow result as a notebook shows it (``FlowResult._repr_html_``): its description line, then its first rows as a
table, and a query's answer where the flow wrote one. Why: printed, a result is one line (its ``repr``), and its
table a pyarrow column dump, so a notebook user's first look at a run was ``result.table.to_pandas()``, typed. Every
value is escaped: a document's text is whatever the corpus holds, ``<script>`` included."""

from __future__ import annotations

from html import escape
from typing import Any

#: The columns shown, in this order, where the table has them (the rest: ``result.table.to_pandas()``).
SHOWN = ("qid", "query", "rank", "docno", "title", "score", "text")
#: Rows shown, and characters of a text value.
ROWS, TEXT_CHARS = 10, 160


def result_html(result: Any, rows: int = ROWS) -> str:
    """The HTML of ``result``: description, answers (``answer`` metadata) and the first ``rows`` rows."""
    table = result.table
    parts = [f"<p><b>{escape(result.flow)}</b>: {escape(result.description())}</p>"]
    answers = [(qid, values["answer"]) for qid, values in result.metadata.items()
               if isinstance(values, dict) and isinstance(values.get("answer"), str)]
    if answers:
        items = "".join(f"<li>{escape(str(qid))}: {escape(answer)}</li>" for qid, answer in answers[:rows])
        parts.append(f"<p>answers</p><ul>{items}</ul>")
    columns = [c for c in SHOWN if c in table.column_names]
    if columns and table.num_rows:
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{_cell(row[c])}</td>" for c in columns) + "</tr>"
                       for row in table.slice(0, rows).select(columns).to_pylist())
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    hidden = [c for c in table.column_names if c not in columns]
    more = [f"{table.num_rows - rows:,} more rows" if table.num_rows > rows else "",
            f"{len(hidden)} more column(s) ({escape(', '.join(hidden[:6]))}{', ...' if len(hidden) > 6 else ''})"
            if hidden else ""]
    if any(more):
        parts.append(f"<p>{' and '.join(m for m in more if m)}: <code>result.table.to_pandas()</code></p>")
    return "".join(parts)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    text = "" if value is None else str(value)
    return escape(text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…")
