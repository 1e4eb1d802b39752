"""A param that names a column a step reads is declared, so a flow naming a column that no step above writes is
refused before any step runs (``flows.spec_columns.missing_columns``), not when that step is reached after the steps
in front of it (their retrieval, their language-model calls) have run. ``postprocess.filter`` declared none of its
filter's columns: a filter on a column nothing writes failed only once the flow reached it."""

import re

import pytest

from flows.spec import FlowSpec
from operators.errors import SpecError
from operators.filters import MetadataFilter
from operators.registry import all_operators, create

UNWRITTEN = "zz_unwritten"
#: What names a column by its param's name: ``text_column``, ``keep_columns``, ``title_field``, ``fields``.
COLUMN_NAME = re.compile(r"(_columns?|_fields?|^fields?)$")
#: The params an operator must have to be made, or that make it read the param tested (``relevance_column`` only
#: gates with ``min_relevance``, ``score_column`` only with ``similarity_cutoff``).
NEEDED = {
    "generate.answer": {"min_relevance": 0.4},
    "postprocess.cutoff": {"similarity_cutoff": 0.5},
    "postprocess.filter": {"filter": {"field": "year", "gte": 2000}},
    "preprocess.chunk": {"tokenizer": "sentence-transformers/all-MiniLM-L6-v2"},
    "rerank.api": {"url": "https://rerank.example.com/v1/rerank"},
    "retrieve.multi_collection": {"collections": [{"name": "a", "index": "a"}]},
}
#: Columns read only when the input has them (a title put before the text, a conversation, a row's language, the
#: ranks a filter renumbers by): not required, so a flow without them is not refused. Each ``(operator, param)``.
OPTIONAL = {
    *((op, "title_column") for op in ("analyze.dimensions", "embed.sentence_transformer", "generate.context",
                                      "summarize.results", "preprocess.dedup", "rerank.api", "rerank.colbert",
                                      "rerank.cross_encoder", "rerank.embedding", "rerank.llm_group",
                                      "rerank.llm_tournament", "rerank.tfidf")),
    *(("generate.references", f"{what}_column") for what in ("number", "cited", "title", "url", "path", "page",
                                                              "snippet")),
    *((f"preprocess.{op}", "language_column") for op in ("lemmatize", "punctuation", "stem", "stopwords")),
    ("generate.answer", "text_column"), ("generate.answer", "question_column"), ("preprocess.chunk", "id_column"),
    ("postprocess.filter", "rank_column"),
    ("preprocess.dedup", "text_column"),  # read with key: content only, which requires it
    ("query.contextualize", "messages_column"), ("retrieve.messages", "messages_column"),
}
#: Fields of the store a retriever searches, which the step brings itself: no step above writes them (a retriever's
#: filter is checked against its index's columns when the run starts, ``Flow.check_filters``, tested below).
STORE = {("retrieve.chroma", "title_field"), ("retrieve.chroma", "text_field"), ("retrieve.qdrant", "title_field"),
         ("retrieve.qdrant", "text_field"), ("retrieve.qdrant", "docno_field"), ("retrieve.bm25", "filter"),
         ("retrieve.dense", "filter")}


def column_params() -> list[tuple[str, str, object]]:
    """Every (operator, param, value naming UNWRITTEN) of the registered operators but the sources (their fields are
    a file's): a param named for a column, and a metadata filter (which names its columns)."""
    found = []
    for name, cls in sorted(all_operators().items()):
        if cls.scope == "source":
            continue
        for param, field in cls.Params.model_fields.items():
            if "MetadataFilter" in str(field.annotation):
                found.append((name, param, MetadataFilter.model_validate({"field": UNWRITTEN, "eq": 1}).model_dump(
                    by_alias=True, exclude_none=True)))
            elif COLUMN_NAME.search(param):
                found.append((name, param, [UNWRITTEN] if "list" in str(field.annotation) else UNWRITTEN))
    return found


def test_the_column_params_are_found():
    found = {(op, param) for op, param, _ in column_params()}
    assert {("postprocess.filter", "filter"), ("generate.answer", "context_column"),
            ("summarize.documents", "input_column"), ("preprocess.chunk", "id_column")} <= found


@pytest.mark.parametrize("op, param, value", column_params(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_column_param_is_written_checked_before_the_flow_runs_or_read_only_when_there(op, param, value):
    """A column named by a param is one the step writes (``produces()``), one a flow is refused for when no step
    above brings it (``required_columns()``: refused naming the step and the param), or one read only if present
    (``OPTIONAL``). An operator added with a column param it declares nowhere fails here."""
    if (op, param) in STORE:
        return
    params = {**NEEDED.get(op, {}), param: value}
    step = create(op, params, step_id="s")
    if UNWRITTEN in step.produces():
        return
    if (op, param) in OPTIONAL:
        assert UNWRITTEN not in step.required_columns(), f"{op}'s {param} is read only when the input has it"
        return
    assert UNWRITTEN in step.required_columns(), (
        f"{op}'s params.{param} names a column it reads, which neither produces() nor required_columns() "
        "declares: a flow where no step writes it runs until this step fails (list it in OPTIONAL if the step "
        "reads it only when present)")
    others = [c for c in step.required_columns() if c != UNWRITTEN]
    flow = FlowSpec.parse({"steps": {"s": {"op": op, "params": params}}}).build()
    with pytest.raises(SpecError) as err:
        flow.check_columns(sorted({"qid", "query", *others}))
    assert (err.value.step, err.value.field) == ("s", f"steps.s.params.{param}"), err.value
    assert err.value.message.startswith(f"needs input column(s) {UNWRITTEN}, which no step above it writes")
    assert "it may hold: " in err.value.message and "qid, query" in err.value.message


def test_a_filter_on_a_column_no_step_writes_is_refused_before_the_retrieval_and_the_summaries(bm25_index,
                                                                                              monkeypatch):
    """``sumary`` for the summarizer's ``summary``: the flow ran BM25 and asked the language model for a summary of
    every document, then the filter failed. Now ``Flow.run`` refuses it first, naming the filter and the columns
    that would be there (the summary among them)."""
    from flows.api import Flow
    from operators.llm.step import LLMStep
    from operators.retrieve.bm25 import BM25Retriever

    def ran(self, table):
        raise AssertionError(f"{self.name} ran before the flow's columns were checked")

    monkeypatch.setattr(BM25Retriever, "transform", ran)
    monkeypatch.setattr(LLMStep, "ask", ran)  # no summary asked of a model
    flow = Flow.load({"name": "summaries", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 3}},
        "sum": {"op": "summarize.documents"},
        "recent": {"op": "postprocess.filter", "params": {"filter": {"field": "sumary", "ne": ""}}}}},
        index=str(bm25_index))
    with pytest.raises(SpecError) as err:
        flow.run(["honey bees"])
    assert (err.value.step, err.value.field) == ("recent", "steps.recent.params.filter")
    assert err.value.message.startswith("needs input column(s) sumary, which no step above it writes")
    assert "summary" in err.value.message.split("it may hold: ")[1]
    # not refused: the summary a step above writes, the title the index holds, a filter after an index not known yet
    for column in ("summary", "title"):
        FlowSpec.parse({"steps": {
            "bm25": {"op": "retrieve.bm25"}, "sum": {"op": "summarize.documents"},
            "keep": {"op": "postprocess.filter", "params": {"filter": {"field": column, "ne": ""}}}}}).with_index(
                bm25_index).build().check_columns(["qid", "query"])
    FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"}, "keep": {"op": "postprocess.filter", "params": {
        "filter": {"field": "year", "gte": 2000}}}}}).build().check_columns(["qid", "query"])


def test_a_retrievers_filter_on_a_column_its_index_lacks_is_refused_before_the_query_is_rewritten(bm25_index,
                                                                                                 monkeypatch):
    """``yeer`` in BM25's filter, behind ``query.keywords``: the language model wrote every query's keywords, then
    the search failed on the filter. Now the run is refused first, in the search's words (the close name too); the
    flow still builds and saves (it may be meant for another index), and a filter on a column the index holds runs."""
    from flows.api import Flow
    from operators.llm.step import LLMStep

    def ran(self, table):
        raise AssertionError(f"{self.name} asked its model before the filter was checked")

    monkeypatch.setattr(LLMStep, "ask", ran)

    def flow(column: str) -> Flow:
        return Flow.load({"name": "keywords", "steps": {
            "kw": {"op": "query.keywords"},
            "bm25": {"op": "retrieve.bm25", "params": {"k": 3, "filter": {"field": column, "ne": ""}}}}},
            index=str(bm25_index))

    with pytest.raises(SpecError) as err:
        flow("titel").run(["honey bees"])
    assert (err.value.step, err.value.field) == ("bm25", "steps.bm25.params.filter")
    assert err.value.message.startswith("filter column(s) ['titel'] not found ('titel': did you mean 'title'?); "
                                        "available columns: ['chunk_index', 'doc_id', 'docno', 'text', 'title'")
    flow("title").built.check_filters()
