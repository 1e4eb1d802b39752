"""Text cut for the terminal (a query as its table's title, a title or text in a cell) and for a web search
result's citation ends at a whole character: cut by code points, a flag (two regional-indicator letters) showed as
one boxed letter, an emoji joined with U+200D as one of its people, a Devanagari syllable without its vowel sign."""

from __future__ import annotations

import io

import pyarrow as pa
import regex
from rich.console import Console

from flows.result import FlowResult
from operators.registry import create


def _ends(text: str) -> set[int]:
    """Where each of ``text``'s grapheme clusters ends."""
    return {0} | {match.end() for match in regex.finditer(r"\X", text)}


def _shown_prefix(printed: str, text: str) -> str:
    """The longest start of ``text`` that ``printed`` holds, followed by the ellipsis of a cut."""
    kept = next(n for n in range(len(text), -1, -1) if text[:n] + "…" in printed)
    return text[:kept]


def test_a_cut_query_title_and_text_end_at_a_whole_character():
    from flows.commands._results import print_results

    query = "q" * 157 + "🇯🇵" + " and more words after the flag"  # cut at 159: inside the flag
    title = "t" * 78 + "👩\u200d👩\u200d👧" + " family"  # cut at 79: inside the joined emoji
    text = "हिन्दी " * 60
    table = pa.table({"qid": ["q1"], "query": [query], "docno": ["d1"], "rank": [1], "score": [1.0],
                      "title": [title], "summary": [text]})
    result = FlowResult("bm25", table, roles={"docno": "id", "title": "data", "summary": "text"})
    out = io.StringIO()
    print_results(Console(file=out, width=400), result, pa.table({"qid": ["q1"], "query": [query]}), top=5)
    printed = out.getvalue()
    for whole in (query, title, text):
        kept = _shown_prefix(printed, whole)
        assert kept and len(kept) in _ends(whole), kept[-4:]
    assert "\U0001f1ef…" not in printed and "\u200d…" not in printed


def test_a_web_search_citation_cuts_its_snippet_at_a_whole_character():
    snippet = "s" * 118 + "🇫🇷 is the flag of France"  # cut at 119: inside the flag
    rows = pa.table({"qid": ["q1"], "docno": ["w1"], "context_index": [1], "cited": [True], "title": ["France"],
                     "url": ["https://example.org/fr"], "snippet": [snippet]})
    reference = create("generate.references")(rows).column("reference")[0].as_py()
    kept = _shown_prefix(reference, snippet)
    assert kept == "s" * 118, reference[-12:]
