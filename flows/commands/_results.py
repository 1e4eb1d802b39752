"""Printing a flow's result: one table per query (rank, docno, title, score, chips), then the steps."""

from __future__ import annotations

import json
from typing import Any

from flows.commands._support import escape
from flows.result import counted
from operators.unicode import whole_characters

#: Characters of a query its table's title shows: a 10,000-character query filled 300 lines of the terminal.
TITLE_CHARS = 160
#: Said under an answer that max_tokens cut (``answer_cut``; not when the cut fell after it: its sources, a short
#: answer's next line), by ``tessera run`` and ``tessera chat``.
CUT_NOTE = "(cut off at the step's max_tokens: the answer may end mid-sentence)"
#: Said under the no-answer text of a query that no document was close to (``abstained``: the answer step's
#: ``min_relevance``), so that it does not read as the model's answer.
ABSTAINED_NOTE = "(no model call: no document found is as close to the question as the step's min_relevance asks)"
#: Said under the no-answer text of a query whose search found no document at all (``documents: 0``).
NO_DOCUMENTS_NOTE = "(no model call: the search found no document for this question)"


def shortened(query: str) -> str:
    """A query as a table's title shows it: on one line, at most ``TITLE_CHARS`` characters (cut at a whole
    character: a flag or a joined emoji in two halves showed as letters in boxes)."""
    flat = " ".join(query.split())
    return flat if len(flat) <= TITLE_CHARS else f"{whole_characters(flat, TITLE_CHARS - 1)}…"


def print_results(out, result, queries, top: int) -> None:
    """One table per query of ``queries``, at most ``top`` rows each, then the query's metadata."""
    import pyarrow as pa
    from rich.table import Table

    from operators.tables import in_rank_order, qid_groups

    table = result.table if isinstance(result.table, pa.Table) else pa.table({})
    chips = [c for c, role in result.roles.items() if role == "chip" and c in table.column_names]
    base = [c for c in ("rank", "docno", "title", "score") if c in table.column_names]
    if "docno" not in base and "query" in table.column_names:
        base.append("query")
    columns = base + [c for c in chips if c not in base] or table.column_names[:6]
    written = [c for c, role in result.roles.items() if role == "text" and c in table.column_names
               and c not in (*columns, *_READ_TEXT)]  # a summary, marked text: too long for a column
    # grouping copies what it groups: the columns shown, not the documents' text (10,000 queries' tables took 3.5 GB
    # where their rows took 2 GB)
    table = table.select([c for c in dict.fromkeys(("qid", "rank", "docno", *columns, *written))
                          if c in table.column_names])
    groups = dict(qid_groups(table)) if "qid" in table.column_names and table.num_rows else {}
    ordered = list(zip(queries.column("qid").to_pylist(), queries.column("query").to_pylist()))
    if not groups and table.num_rows:  # not a per-query result: one table
        ordered, groups = [(None, None)], {None: table}
    for qid, text in ordered:
        rows = groups.get(qid)
        title = escape(f"{qid}: {shortened(text)}" if qid is not None else f"{table.num_rows} rows")
        if rows is None or rows.num_rows == 0:
            out.print(f"[bold]{title}[/]  no results")
        else:
            rows = in_rank_order(rows)
            shown = rows.slice(0, min(top, rows.num_rows))  # --top 10**20: every row
            out.print(f"[bold]{title}[/]")  # a line of its own: a table's title wraps at the table's width
            view = Table(caption_justify="left")
            for col in columns:
                kind = rows.schema.field(col).type
                numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
                view.add_column(escape(col), justify="right" if numeric else "left",
                                style="cyan" if col in chips else None, overflow="fold")
            for row in shown.select(columns).to_pylist():
                view.add_row(*[cell(row[c]) for c in columns])
            if rows.num_rows > top:
                more = rows.num_rows - top
                view.caption = f"{counted(more, 'more row')} (--top N to show more)"
            out.print(view)
            print_written(out, shown, written)
        print_metadata(out, result.metadata.get(str(qid), {}) if qid is not None else {})


#: Text columns a search brings (the corpus's), not written by the flow's steps.
_READ_TEXT = ("text", "title", "query", "original_query")
#: Characters of a step's text shown per row under a table (--json or --out has it whole).
WRITTEN_CHARS = 300


def print_written(out, rows, columns: list[str]) -> None:
    """The text columns the flow's steps wrote (``summarize.documents``' summary, ``analyze.relevance_marking``'s
    marked text), a line per shown row under its table: they had no place in it, and only --json showed them."""
    from rich.padding import Padding

    for row in rows.select([c for c in ("rank", "docno", *columns) if c in rows.column_names]).to_pylist():
        for column in columns:
            if row.get(column):
                where = f"{row.get('rank', '')} {row.get('docno', '')}".strip()
                out.print(Padding(f"[bold]{escape(column)}[/] ({escape(where)}): "
                                  f"{cell(row[column], limit=WRITTEN_CHARS)}", (0, 0, 0, 2)))


def top_rows(table, top: int):
    """At most ``top`` rows per query in rank order (``--top`` for ``--json``); one slice for a table without qid."""
    import pyarrow as pa

    from operators.tables import in_rank_order, qid_groups

    top = min(top, table.num_rows)  # a slice's length is a C long: --top 10**20 means every row
    if "qid" not in table.column_names or table.num_rows == 0:
        return table.slice(0, top)
    return pa.concat_tables([in_rank_order(rows).slice(0, top) for _, rows in qid_groups(table)])


def print_metadata(out, meta: dict[str, Any]) -> None:
    """A query's metadata under its table: the summary, the answer and its numbered sources first, read as prose."""
    from rich.padding import Padding

    if "summary" in meta:
        out.print(Padding(f"[bold]summary[/]: {escape(str(meta['summary']))}", (0, 0, 0, 2)))
    if "answer" in meta:
        out.print(Padding(f"[bold]answer[/]: {escape(str(meta['answer']))}", (0, 0, 0, 2)))
        print_answer_notes(out, meta)
        if meta.get("reasoning"):
            out.print(Padding(f"[bold]reasoning[/]: {escape(str(meta['reasoning']))}", (0, 0, 0, 2)))
    if meta.get("references"):
        # true whichever style asked: a short answer's prompt asks for no citations at all
        how = {"overlap": " (attributed by shared words, not cited by the model)",
               "span": " (the documents that hold the answer)"}.get(meta.get("sources_from"), "")
        out.print(f"  [bold]sources[/]{how}:")
        for reference in meta["references"]:
            out.print(Padding(escape(str(reference)), (0, 0, 0, 4)))
    elif "answer" in meta:
        out.print(f"  [bold]sources[/]: {escape(', '.join(map(str, meta.get('sources') or []))) or 'none cited'}")
    for step, used in (meta.get("usage") or {}).items():
        out.print(f"  [bold]usage[/] ({escape(str(step))}): {used.get('prompt_tokens', 0)} prompt + "
                  f"{used.get('completion_tokens', 0)} completion tokens, {used.get('seconds', 0):.2f} s, "
                  f"{escape(str(used.get('model', '')))}")
    shown = {"summary", "answer", "reasoning", "references", "sources", "sources_from", "usage", "raw_response",
             "finish_reason", "answer_cut", "abstained", "documents"}
    for key, value in meta.items():
        if key not in shown and not (key == "relevance" and value is None):  # no row had one: said by the note
            out.print(f"  [bold]{escape(str(key))}[/]: {cell(value, limit=2000)}")


def print_answer_notes(out, meta: dict[str, Any]) -> None:
    """The lines under an answer that say what kind of answer it is: cut by max_tokens (``answer_cut``: not when the
    cut fell after it, in its sources or a short answer's next line), or the no-answer text (``abstained``)."""
    if meta.get("answer_cut"):
        out.print(f"  [dim]{CUT_NOTE}[/]")
    if meta.get("abstained"):
        out.print(f"  [dim]{NO_DOCUMENTS_NOTE if meta.get('documents') == 0 else ABSTAINED_NOTE}[/]")


def cell(value: Any, limit: int = 80) -> str:
    """A value as table text: short floats, JSON for lists and dicts, cut at ``limit`` characters."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value, default=str, ensure_ascii=False)
    text = str(value)
    return escape(text if len(text) <= limit else whole_characters(text, limit - 1) + "…")


def print_steps(out, result) -> None:
    from rich.table import Table

    table = Table(title="steps", title_justify="left", title_style="bold")
    llm = any(rec.usage for rec in result.steps.values())
    for col, justify in (("step", "left"), ("operator", "left"), ("rows in", "right"), ("rows out", "right"),
                         ("cache hits", "right"), ("seconds", "right"), *((("LLM calls, tokens", "right"),) if llm
                                                                         else ())):
        table.add_column(col, justify=justify)
    for step, rec in result.steps.items():
        cache = f"{rec.hits}/{rec.units}" if rec.cached else "off"
        used = rec.usage
        tokens = (f"{used.get('llm_calls', 0):.0f}, {used.get('prompt_tokens', 0):.0f}+"
                  f"{used.get('completion_tokens', 0):.0f}") if used else ""
        if used.get("llm_failed"):
            tokens += f" ({used['llm_failed']:.0f} failed)"
        table.add_row(escape(step), rec.op, str(rec.rows_in), str(rec.rows_out), cache, f"{rec.seconds:.3f}",
                      *((tokens,) if llm else ()))
    out.print(table)
