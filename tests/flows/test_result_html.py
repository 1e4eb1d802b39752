"""A result in a notebook (``FlowResult._repr_html_``, ``flows.result_html``): its description, then its first rows
as a table; printed, it stayed one line, and its table a pyarrow column dump. Document text is escaped: a corpus
that holds ``<script>`` shows it as text. A real BM25 flow over a corpus in tmp_path, in-process."""

from __future__ import annotations

import json

from flows.api import Flow

DOCS = [{"_id": f"d{i}", "title": f"Bees {i}", "text": f"Honey bees make honey, note {i}."} for i in range(12)] + [
    {"_id": "x", "title": "<b>bold</b>", "text": "Honey <script>alert('bees')</script> " + "long " * 60}]


def run(tmp_path, queries):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    return Flow.load({"name": "lex", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                        "params": {"corpus": str(corpus), "k": 20}}}}).run(queries)


def test_a_notebook_shows_the_first_rows_as_a_table_and_says_how_to_see_the_rest(tmp_path):
    result = run(tmp_path, ["honey bees"])
    html = result._repr_html_()
    assert html.startswith(f"<p><b>lex</b>: {result.description()}</p>")
    assert "<th>qid</th><th>query</th><th>rank</th><th>docno</th><th>title</th><th>score</th><th>text</th>" in html
    shown = result.table.slice(0, 10).column("docno").to_pylist()
    assert all(f"<td>{docno}</td>" in html for docno in shown)
    assert html.count("<tr>") == 11  # the header and ten rows
    assert html.endswith(f"<p>{result.table.num_rows - 10:,} more rows and 2 more column(s) (score_bm25, rank_bm25): "
                         "<code>result.table.to_pandas()</code></p>")
    assert repr(result).startswith("FlowResult('lex': ")  # printed, still one line


def test_document_text_and_titles_are_escaped_and_long_text_cut(tmp_path):
    html = run(tmp_path, ["script alert"])._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;bees&#x27;)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    [text] = [cell for cell in html.split("<td>") if cell.startswith("Honey &lt;script")]
    assert text.endswith("…</td></tr></tbody></table><p>2 more column(s) (score_bm25, rank_bm25): "
                         "<code>result.table.to_pandas()</code></p>") and len(text) < 300


def test_an_answer_a_flow_wrote_is_shown_above_the_rows_escaped(tmp_path):
    result = run(tmp_path, ["honey bees"])
    result.metadata = {"1": {"answer": "Bees make <honey> [1]", "sources": ["d1"]}}
    assert "<p>answers</p><ul><li>1: Bees make &lt;honey&gt; [1]</li></ul><table>" in result._repr_html_()
