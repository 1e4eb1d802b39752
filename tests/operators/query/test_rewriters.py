"""query.expand / decompose / keywords: hand-made replies (the fault server), failures, the embedded model."""

from __future__ import annotations

import pytest

from operators import create
from operators.query._rewrite import keywords_of
from operators.testing import OperatorContract, sample_queries


class _OnQueries:
    """The contract on a queries table; the model writes junk and fallback is off, so no qid is added (the
    contract's "no invented queries" check), while the extra rows are what the tests below check."""

    @pytest.fixture(autouse=True)
    def _model(self, fault_models):
        pass

    def make_operator(self, **params):
        return create(self.operator_name, {"model": "fault-junk", "fallback": "none", **params})

    def make_input(self, n_queries: int = 3, per_query: int = 5):
        return sample_queries(n_queries)


class TestExpandContract(_OnQueries, OperatorContract):
    operator_name = "query.expand"


class TestDecomposeContract(_OnQueries, OperatorContract):
    operator_name = "query.decompose"


class TestKeywordsContract(_OnQueries, OperatorContract):
    operator_name = "query.keywords"


def extra(out):
    return [(r["qid"], r["original_qid"], r["query_source"], r["query"]) for r in out.to_pylist()
            if r["qid"] != r["original_qid"]]


def test_expand_keeps_valid_novel_queries_per_strategy(fault_models):
    fault_models.reply = ("Here are the queries:\n1. honey bees pollination\n2. Which insects make honey and "
                          "pollinate flowers?\n- x9\n- \"bumblebee nectar gathering\"\n3. bees")
    table = sample_queries(1)
    op = create("query.expand", {"model": "fault-ok", "strategies": ["rephrase", "broaden"], "max_queries": 5},
                step_id="x")
    out = op(table)
    assert extra(out) == [("q1#1", "q1", "rephrase", "honey bees pollination"),
                          ("q1#2", "q1", "rephrase", "bumblebee nectar gathering")]   # broaden's are duplicates
    assert out.column("qid").to_pylist()[0] == "q1" and fault_models.attempts["ok"] == 2
    prompts = [body["messages"][-1]["content"] for body in fault_models.bodies]  # sent at once: in any order
    assert sum("Rephrase the question" in p for p in prompts) == 1 and sum("broader" in p for p in prompts) == 1
    metadata = op.drain_metadata()["q1"]
    assert metadata["usage"]["x"]["calls"] == 2
    # what the model wrote and what the checks cut, per query: the extra rows are gone after fuse.expanded_queries
    assert metadata["expanded_queries"] == {"kept": ["honey bees pollination", "bumblebee nectar gathering"],
                                            "left_out": {"too similar": 4, "too short": 4}}


def test_similarity_threshold_and_max_queries(fault_models):
    fault_models.reply = "honey bees pollination\nhoney bees pollination flowers\nbumblebee nectar"
    strict = create("query.expand", {"model": "fault-ok", "strategies": ["rephrase"], "similarity_threshold": 0.5})
    assert [q for *_, q in extra(strict(sample_queries(1)))] == ["honey bees pollination", "bumblebee nectar"]
    one = create("query.expand", {"model": "fault-ok", "strategies": ["rephrase"], "max_queries": 1})
    assert len(extra(one(sample_queries(2)))) == 2


@pytest.mark.parametrize("scenario", ["error", "junk", "ok"])
def test_the_keyword_fallback_when_the_model_fails_or_writes_nothing_valid(fault_models, scenario):
    fault_models.reply = "ok\n12345"
    op = create("query.expand", {"model": f"fault-{scenario}", "strategies": ["diagnose"], "num_retries": 0},
                step_id="x")
    out = op(sample_queries(1))
    assert extra(out) == [("q1#1", "q1", "fallback_keywords", "insects make honey pollinate flowers")]
    degraded = op.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "x" and degraded["reason"].endswith("; the question's keywords are the extra query")
    none = create("query.expand", {"model": f"fault-{scenario}", "strategies": ["diagnose"], "num_retries": 0,
                                   "fallback": "none"})
    assert none(sample_queries(1)).num_rows == 1


def test_decompose_and_keywords(fault_models):
    fault_models.reply = "Which insects make honey?\nWhich insects pollinate flowers?"
    out = create("query.decompose", {"model": "fault-ok"})(sample_queries(1))
    assert [(s, q) for _, _, s, q in extra(out)] == [("subquestion", "Which insects make honey?"),
                                                     ("subquestion", "Which insects pollinate flowers?")]
    fault_models.reply = "Keywords: honeybee, pollination, the flowers"
    out = create("query.keywords", {"model": "fault-ok"})(sample_queries(1))
    assert extra(out) == [("q1#1", "q1", "keywords", "honeybee pollination flowers")]  # the label is no keyword


def test_the_prompts_own_words_are_no_keywords(fault_models):
    """SmolLM2 answered 'The bee is the most important search keyword of this question.': the keyword query was
    'bee search keyword question'. A word of the instructions stays when the question has it."""
    fault_models.reply = "The bee is the most important search keyword of this question."
    out = create("query.keywords", {"model": "fault-ok"})(sample_queries(1))
    assert extra(out) == [("q1#1", "q1", "keywords", "bee")]
    fault_models.reply = "search engines, bee"
    table = sample_queries(1).set_column(1, "query", [["which search engines index bees"]])
    assert extra(create("query.keywords", {"model": "fault-ok"})(table))[0][3] == "search engines bee"


def test_the_keyword_query_holds_at_most_count_keywords(fault_models):
    """With ``count: 2`` the embedded model's 'insects make honey pollinate flowers' was kept whole (a run of words
    was one keyword), a numbered list kept its numbers as words ('1 honeybee 2 pollination'), a label or an empty item
    took a keyword's place, and a failed call gave the question's five keywords."""
    def keywords(reply: str, model: str = "fault-ok") -> list[tuple[str, str]]:
        fault_models.reply = reply
        out = create("query.keywords", {"model": model, "count": 2, "num_retries": 0})(sample_queries(1))
        return [(source, query) for _, _, source, query in extra(out)]

    assert keywords("insects make honey pollinate flowers") == [("keywords", "insects make")]
    assert keywords("1. honeybee\n2. pollination\n3. nectar") == [("keywords", "honeybee pollination")]
    assert keywords("Keywords:\n- honeybee\n- pollination\n- nectar") == [("keywords", "honeybee pollination")]
    assert keywords("honeybee, , pollination, nectar") == [("keywords", "honeybee pollination")]
    assert keywords("honey bee colony, flower nectar, wax") == [("keywords", "honey bee colony flower nectar")]
    assert keywords("", model="fault-error") == [("fallback_keywords", "insects make")]


def test_a_looping_reply_is_no_query(fault_models):
    """SmolLM2 cut at max_tokens wrote 'A: A: A: ...' for query.expand's broaden, kept as a query (too short
    for ``repetition``, which needs 40 words)."""
    fault_models.reply = "A: A: A: A: A: A: A: A: A: A: A: A: A: A: A: A\nhoney bees pollination"
    out = create("query.expand", {"model": "fault-ok", "strategies": ["broaden"]})(sample_queries(1))
    assert [q for *_, q in extra(out)] == ["honey bees pollination"]


def test_keywords_of_drops_stopwords_and_repeats():
    assert keywords_of("Which of the insects make the honey, and which insects?") == "insects make honey"
    # ISO's 1,298 stopwords took what these questions are about: "stone gap york city", "annie morton ..."
    assert keywords_of("The director of Big Stone Gap is based in what New York city?") == \
        "director big stone gap based new york city"
    assert keywords_of("Who is older, Annie Morton or Terry Richardson?") == "older annie morton terry richardson"
    assert keywords_of("1 in 5 million in the UK have hepatitis C") == "1 5 million uk hepatitis c"


def test_columns_pass_through_and_one_row_per_qid(fault_models):
    fault_models.reply = "honey bees pollination"
    table = sample_queries(2).append_column("lang", [["en", "en"]])
    out = create("query.keywords", {"model": "fault-ok"})(table)
    assert out.column_names == ["qid", "query", "lang", "original_qid", "original_query", "query_source",
                                "extra_queries"]
    assert out.column("lang").to_pylist() == ["en"] * out.num_rows
    with pytest.raises(Exception, match="each qid must appear once"):
        create("query.keywords", {"model": "fault-ok"})(table.take([0, 0]))
    empty = create("query.keywords", {"model": "fault-ok"})(table.slice(0, 0))
    assert empty.num_rows == 0 and "original_qid" in empty.column_names


def test_merged_rows_keep_their_query_when_only_the_extra_query_found_them(fault_models):
    """A question of stopwords only ('the of and') finds nothing by BM25; its keywords query does. Merged back, those
    rows carried the keywords query's text under the question's qid (a reranker after it scored against the wrong
    text); each merged row now has its own question's text, and the other question keeps its own."""
    import pyarrow as pa

    from flows.api import Flow

    fault_models.reply = "honey, bees"
    flow = Flow.load({"name": "kw", "steps": {
        "kw": {"op": "query.keywords", "params": {"model": "fault-ok"}},
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"k": 3}},
        "merged": {"op": "fuse.expanded_queries"}}})
    questions = {"stop": "the of and", "opera": "opera composed in the nineteenth century"}
    out = flow.run(pa.table({"qid": list(questions), "query": list(questions.values())}), cache=False).table
    assert set(out.column("qid").to_pylist()) == set(questions)
    assert [(r["qid"], r["query"]) for r in out.to_pylist() if r["query"] != questions[r["qid"]]] == []


@pytest.mark.slow
def test_the_embedded_model_writes_valid_queries_or_the_fallback():
    op = create("query.expand", {"model": "local", "strategies": ["rephrase"], "max_tokens": 24}, step_id="x")
    out = op(sample_queries(1))
    rows = extra(out)
    assert 1 <= len(rows) <= 3 and all(orig == "q1" for _, orig, _, _ in rows)
    for _, _, source, text in rows:
        assert source in ("rephrase", "fallback_keywords") and len(text.split()) >= 2
    assert op.drain_metadata()["q1"]["usage"]["x"]["calls"] == 1


def test_a_cache_hit_gives_the_rows_a_fresh_run_gave(fault_models, cache):
    """The step cache keeps a row-scope step's declared columns: the added rows' qid and query are among them, so
    a second run brings the expanded queries back rather than copies of the question."""
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    fault_models.reply = "honey bees pollination\nbumblebee nectar gathering"
    spec = FlowSpec.parse({"name": "expanded", "steps": {
        "expand": {"op": "query.expand", "params": {"model": "fault-ok", "strategies": ["rephrase"]}},
        "keywords": {"op": "query.keywords", "params": {"model": "fault-ok"}, "inputs": ["expand"]}}})
    first = LocalExecutor(cache=cache).run(spec, sample_queries(2)).table
    again = LocalExecutor(cache=cache).run(spec, sample_queries(2))
    assert again.steps["expand"].hits == 2 and again.steps["keywords"].hits == again.steps["keywords"].rows_in == 6
    assert again.table.sort_by("qid").to_pylist() == first.sort_by("qid").to_pylist()
    qids = first.column("qid").to_pylist()
    assert len(qids) == len(set(qids)) and "q1#3" in qids  # keywords numbered past expand's q1#1, q1#2


def test_a_query_with_a_failed_call_keeps_the_others_queries_and_is_marked_degraded():
    from operators.llm.gateway import Completion, LLMError

    op = create("query.expand", {"model": "local"}, step_id="x")  # replies given below: no call made
    replies = [("rephrase", Completion(text="honey bees pollination", model="m")),
               ("broaden", LLMError("the server said 500", kind="api"))]
    assert op._kept("q1", "Which insects make honey?", replies) == [("rephrase", "honey bees pollination")]
    degraded = op.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "x" and degraded["reason"].startswith("1 of 2 calls failed")
    # all calls failed and the keywords are the question's own words: nothing added, and the reason says why
    assert op._kept("q2", "honey bees", [("rephrase", LLMError("boom", kind="api"))]) == []
    assert "keywords fallback was left out" in op.drain_metadata()["q2"]["degraded"]["reason"]


@pytest.mark.parametrize("name", ["query.expand", "query.decompose"])
def test_bounds_no_generated_query_could_meet_are_refused(name):
    """min_chars 100 with max_chars 10 built, and every query silently took the keyword fallback."""
    from operators.errors import ParamsError

    with pytest.raises(ParamsError) as err:
        create(name, {"min_chars": 100, "max_chars": 10}, step_id="rewrite")
    assert err.value.field == "params.max_chars" and "less than min_chars 100" in str(err.value)


def test_a_strategy_given_twice_is_refused():
    """strategies: [rephrase, rephrase] sent the same prompt twice for every query."""
    from operators.errors import ParamsError

    with pytest.raises(ParamsError) as err:
        create("query.expand", {"strategies": ["rephrase", "broaden", "rephrase"]}, step_id="expand")
    assert err.value.field == "params.strategies" and "rephrase given more than once" in str(err.value)


def test_a_list_mark_is_removed_and_what_starts_a_query_is_not(fault_models):
    """`U.S. presidents` was kept as `S. presidents`, `2019: the year` as `the year`: the mark pattern took a letter
    or any number before a dot or colon."""
    fault_models.reply = ("1. honey bees pollination\n2) bumblebee nectar gathering\na) wasps and hornets nests\n"
                          "U.S. presidents born in Ohio\nJ.K. Rowling first novel title\n2019: the year bees vanished\n"
                          "A. Lincoln birthplace museum")
    op = create("query.expand", {"model": "fault-ok", "strategies": ["rephrase"], "max_queries": 10})
    assert [q for *_, q in extra(op(sample_queries(1)))] == [
        "honey bees pollination", "bumblebee nectar gathering", "wasps and hornets nests",
        "U.S. presidents born in Ohio", "J.K. Rowling first novel title", "2019: the year bees vanished",
        "A. Lincoln birthplace museum"]


def test_a_reply_cut_at_max_tokens_loses_its_cut_last_line(fault_models):
    fault_models.reply = "honey bees pollination\nwhich insects besides bees produce hon"
    out = create("query.expand", {"model": "fault-length", "strategies": ["rephrase"]})(sample_queries(1))
    assert [q for *_, q in extra(out)] == ["honey bees pollination"]
    fault_models.reply = "honey bees, pollination, nectar gath"
    out = create("query.keywords", {"model": "fault-length"})(sample_queries(1))
    assert [q for *_, q in extra(out)] == ["honey bees pollination"]


def test_after_another_rewriter_only_the_question_is_rewritten_and_against_all_that_one_added(fault_models):
    """query.keywords after query.expand made one call per row (the question and each expansion), and three rows
    of the same text 'wasps hornets', which fuse.expanded_queries then counted as three branches."""
    fault_models.reply = "wasps hornets\nbumblebee nectar gathering"
    expanded = create("query.expand", {"model": "fault-ok", "strategies": ["rephrase"]})(sample_queries(1))
    assert [q for *_, q in extra(expanded)] == ["wasps hornets", "bumblebee nectar gathering"]
    fault_models.reset()
    fault_models.reply = "wasps, hornets"
    out = create("query.keywords", {"model": "fault-ok"})(expanded)
    assert fault_models.attempts["ok"] == 1  # one call for the one question, as docs/llm.md says
    passed = [r for r in out.to_pylist() if r["qid"] in ("q1#1", "q1#2")]
    assert passed == expanded.to_pylist()[1:]  # the rows expand added pass as they are
    [question] = [r for r in out.to_pylist() if r["qid"] == "q1"]  # its row lists every extra query
    assert question == {**expanded.to_pylist()[0], "extra_queries": [
        "wasps hornets", "bumblebee nectar gathering", "insects make honey pollinate flowers"]}
    # its one query copied expand's: no second 'wasps hornets', the question's keywords instead (marked degraded)
    assert sorted(q for *_, q in extra(out)) == ["bumblebee nectar gathering", "insects make honey pollinate flowers",
                                                 "wasps hornets"]
    fault_models.reply = "pollen, wax, hive"
    out = create("query.keywords", {"model": "fault-ok"})(expanded)
    assert [e for e in extra(out) if e[2] == "keywords"] == [("q1#3", "q1", "keywords", "pollen wax hive")]


@pytest.mark.parametrize("how", ["cached", "one_row_a_batch"])
def test_a_second_rewriter_numbers_past_the_first_ones_queries_however_the_rows_are_cut(fault_models, tmp_path, how):
    """query.decompose then query.keywords: a warm step cache (a row a unit) or a batch of one row gave the
    keywords' query the qid of decompose's first (two queries as ``q1#1``), as the original's row was rewritten
    without the rows decompose added after it; now that row lists them (``extra_queries``)."""
    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    fault_models.reply = "Which insects make honey?\nHow do bees pollinate flowers?"
    spec = FlowSpec.parse({"name": "two_rewriters", "steps": {
        "dec": {"op": "query.decompose", "params": {"model": "fault-ok"}},
        "kw": {"op": "query.keywords", "params": {"model": "fault-error", "num_retries": 0},  # fails: its fallback
               **({"batch_size": 1} if how == "one_row_a_batch" else {})}}})
    queries = sample_queries(2)
    cache = StepCache(tmp_path / "cache") if how == "cached" else None
    runs = [LocalExecutor(cache=cache).run(spec, queries).table for _ in range(2 if cache else 1)]
    for out in runs:
        qids = out.column("qid").to_pylist()
        assert len(qids) == len(set(qids)), qids
        assert sorted(extra(out)) == [
            ("q1#1", "q1", "subquestion", "Which insects make honey?"),
            ("q1#2", "q1", "subquestion", "How do bees pollinate flowers?"),
            ("q1#3", "q1", "fallback_keywords", "insects make honey pollinate flowers"),
            ("q2#1", "q2", "subquestion", "Which insects make honey?"),
            ("q2#2", "q2", "subquestion", "How do bees pollinate flowers?"),
            ("q2#3", "q2", "fallback_keywords", "opera composed nineteenth century")]
        assert [r["extra_queries"] for r in out.to_pylist() if r["qid"] == "q1"] == [[
            "Which insects make honey?", "How do bees pollinate flowers?", "insects make honey pollinate flowers"]]


def test_a_keywords_fallback_an_earlier_rewriter_already_added_is_not_added_again(fault_models):
    """Two failing rewriters each fell back on the question's keywords: the same query searched twice."""
    first = create("query.expand", {"model": "fault-error", "strategies": ["rephrase"], "num_retries": 0})(
        sample_queries(1))  # (no retries: litellm's waits between them are what this test is not about)
    assert [q for *_, q in extra(first)] == ["insects make honey pollinate flowers"]
    op = create("query.keywords", {"model": "fault-error", "num_retries": 0}, step_id="kw")
    second = op(first)
    assert [q for *_, q in extra(second)] == ["insects make honey pollinate flowers"]
    assert "an earlier query's" in op.drain_metadata()["q1"]["degraded"]["reason"]


def test_a_cached_extra_query_never_takes_a_qid_the_input_gives_another_query(fault_models, tmp_path):
    """Run on queries ``1``, then on ``1`` and ``1#1`` with the same cache: the cached row of ``1`` replayed its
    extra query as ``1#1``, beside the input's own ``1#1``; it is computed afresh, numbered past it (``1#2``), as
    without the cache."""
    import pyarrow as pa

    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    fault_models.reply = "bumblebee nectar gathering"
    spec = FlowSpec.parse({"name": "expand_only", "steps": {
        "expand": {"op": "query.expand", "params": {"model": "fault-ok", "strategies": ["rephrase"]}}}})
    executor = LocalExecutor(cache=StepCache(tmp_path / "cache"))
    first = executor.run(spec, pa.table({"qid": ["1"], "query": ["which insects make honey"]})).table
    assert first.column("qid").to_pylist() == ["1", "1#1"]
    both = pa.table({"qid": ["1", "1#1"], "query": ["which insects make honey", "what is an opera"]})
    out = executor.run(spec, both).table
    qids = out.column("qid").to_pylist()
    assert len(qids) == len(set(qids)), qids
    assert extra(out) == [("1#2", "1", "rephrase", "bumblebee nectar gathering"),
                          ("1#1#1", "1#1", "rephrase", "bumblebee nectar gathering")]


@pytest.mark.parametrize("op", ["query.expand", "query.decompose", "query.keywords"])
def test_on_error_error_fails_the_step_without_saying_a_fallback_was_written(fault_models, op):
    """With on_error: error the step failed with "...; the question's keywords are the extra query", a fallback
    that was never written (and "the others' queries kept" for a query whose rows were not kept either)."""
    from operators.errors import StepFailed
    from operators.llm.gateway import Completion, LLMError

    step = create(op, {"model": "fault-error", "num_retries": 0, "on_error": "error"}, step_id="x")
    with pytest.raises(StepFailed) as err:
        step(sample_queries(1))
    assert err.value.message.endswith("InternalServerError: the fault server failed on purpose"), err.value.message
    assert "extra query" not in err.value.message
    expand = create("query.expand", {"model": "local", "on_error": "error"}, step_id="x")  # replies given: no call
    replies = [("rephrase", Completion(text="honey bees pollination", model="m")),
               ("broaden", LLMError("the server said 500", kind="api"))]
    with pytest.raises(StepFailed, match=r"query 'q1': 1 of 2 calls failed: api: the server said 500$"):
        expand._kept("q1", "Which insects make honey?", replies)


def test_a_cached_row_keeps_the_question_as_asked_that_its_input_gives(fault_models, tmp_path):
    """After ``query.contextualize`` two follow-ups asked differently ("where do they live?", "and their homes?")
    can stand alone as the same query: the rewriter's cached row (keyed by qid, query and extra_queries alone) gave
    the second the first one's ``original_query``, the question that generate.answer reads the answer against."""
    import pyarrow as pa

    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    fault_models.reply = "bumblebee nectar gathering"
    spec = FlowSpec.parse({"name": "expand_only", "steps": {
        "expand": {"op": "query.expand", "params": {"model": "fault-ok", "strategies": ["rephrase"]}}}})
    executor = LocalExecutor(cache=StepCache(tmp_path / "cache"))

    def asked(question: str) -> set[str]:
        queries = pa.table({"qid": ["1"], "query": ["where do honey bees live"], "original_query": [question]})
        return set(executor.run(spec, queries).table.column("original_query").to_pylist())

    assert asked("where do they live?") == {"where do they live?"}
    assert asked("and their homes?") == {"and their homes?"}
    assert asked("where do they live?") == {"where do they live?"}


@pytest.mark.parametrize("name", ["query.expand", "query.decompose", "query.keywords"])
def test_an_empty_question_is_not_sent_and_degrades_its_query(fault_models, name):
    """An empty question was sent; the model's lines about nothing became extra queries of it."""
    import pyarrow as pa

    fault_models.reply = "honey bee pollination\nbumblebee nectar gathering"
    table = pa.table({"qid": ["q1", "q2"], "query": ["", "   "]})
    op = create(name, {"model": "fault-ok"}, step_id="x")
    out = op(table)
    assert out.column("qid").to_pylist() == ["q1", "q2"] and fault_models.attempts["ok"] == 0
    meta = op.drain_metadata()
    assert all("the question is empty" in meta[q]["degraded"]["reason"] for q in ("q1", "q2"))
