"""generate.answer: the contract on the fault server, one real answer from the embedded model, parsing, the
degrade policy, and the cache rule (cached at temperature 0, never above)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from operators.errors import OperatorError, ParamsError
from operators.generate.answer import answer_cut, parse_answer
from operators.llm.testing import SLOW_TIMEOUT_S
from operators.registry import create, get_operator
from operators.testing import OperatorContract, sample_results


def with_context(table: pa.Table, **params) -> pa.Table:
    return create("generate.context", {"max_context_length": 400, **params})(table)


class TestAnswerContract(OperatorContract):
    operator_name = "generate.answer"

    @pytest.fixture(autouse=True)
    def _fault_models(self, fault_models):
        self.server = fault_models

    def make_operator(self, **params):
        return get_operator(self.operator_name)({"model": "fault-ok", **params}, step_id="answer")

    def make_input(self, n_queries=3, per_query=5):
        return with_context(sample_results(n_queries, per_query))


def test_answers_cite_and_record_usage(fault_models):
    op = create("generate.answer", {"model": "fault-ok"}, step_id="answer")
    table = with_context(sample_results(2, 3))
    out = op(table)
    assert out.num_rows == table.num_rows and out.column("cited").to_pylist() == [True, False, False] * 2
    meta = op.drain_metadata()
    first = table.column("docno")[0].as_py()
    assert meta["q1"]["answer"] == "Honey bees make honey [1]." and meta["q1"]["sources"] == [first]
    assert meta["q1"]["raw_response"] == fault_models.reply and meta["q1"]["reasoning"] == ""
    assert meta["q1"]["finish_reason"] == "stop"
    usage = meta["q1"]["usage"]["answer"]
    assert usage["calls"] == 1 and usage["prompt_tokens"] > 50 and usage["completion_tokens"] == 7
    assert op.drain_usage()["llm_calls"] == 2


def test_without_context_the_question_alone_is_asked(fault_models):
    """context_column null (answer_only): a closed-book prompt on the queries table, no sources."""
    from operators.testing import sample_queries

    op = create("generate.answer", {"model": "fault-ok", "context_column": None}, step_id="answer")
    assert op.requires() == ["qid", "query"] and "Documents" not in op.prompts()["prompt"]
    out = op(sample_queries(2))
    assert out.column("cited").to_pylist() == [False, False]
    meta = op.drain_metadata()
    assert meta["q1"]["answer"] == "Honey bees make honey [1]." and meta["q1"]["sources"] == []
    assert meta["q1"]["sources_from"] == "none"
    sent = fault_models.bodies[-1]["messages"]
    assert sent[-1]["content"].startswith("Question: ") and "[Document" not in sent[-1]["content"]
    assert op.cache_identity()["prompts"] != create("generate.answer", {"model": "fault-ok"}).cache_identity()[
        "prompts"]


@pytest.mark.slow
def test_the_embedded_model_answers_from_the_context():
    op = create("generate.answer", {"model": "local", "max_tokens": 48}, step_id="answer")
    op(with_context(sample_results(1, 3), max_context_length=300))
    meta = op.drain_metadata()["q1"]
    assert meta["answer"].strip() and meta["raw_response"].strip() and "degraded" not in meta
    assert set(meta["sources"]) <= set(sample_results(1, 3).column("docno").to_pylist())
    assert 0 < meta["usage"]["answer"]["completion_tokens"] <= 48


@pytest.mark.parametrize("text, documents, expected", [
    ("Bees make honey [1] and wax [Document 3].\nSources: 1, 3", 3, ("Bees make honey [1] and wax [3].", [1, 3])),
    ("Answer: Paris [2].\nReasoning: document 2 says so.\nSources: [2]", 2, ("Paris [2].", [2])),
    ("It is Verdi [1, 2] (see [9]).", 2, ("It is Verdi [1, 2] (see [9]).", [1, 2])),
    ("No document says.", 4, ("No document says.", [])),
    # a sources label on the answer's own line was left in the answer; a citation the cut left open too
    ("Bees make honey. Sources: [1]", 2, ("Bees make honey.", [1])),
    ("Bees make honey [2]. **References:** 1, 2", 2, ("Bees make honey [2].", [2, 1])),
    ("Bees make honey. Sources: [1", 2, ("Bees make honey.", [1])),
    ("Bees make honey [1", 2, ("Bees make honey", [])),
    ("The sources: bees and wasps [1].", 2, ("The sources: bees and wasps [1].", [1])),  # no sentence before it
])
def test_parse_answer(text, documents, expected):
    parsed = parse_answer(text, documents)
    assert (parsed["answer"], parsed["sources"]) == expected


@pytest.mark.parametrize("text, short, cut", [
    ("Arachnids make honey.\n\nArachneidae is a family", True, False),  # SmolLM2's, stopped after its answer
    ("Arachnids make honey.\n", True, False),
    ("\n Arachnids make", True, True),
    ("Bees make honey [1].\nSources: 1, 3", False, False),
    ("Answer: Bees [1].\nReasoning: document 1 says that bees", False, False),
    ("Reasoning: document 1 says so.\nAnswer: Bees make", False, True),
    ("Bees make honey [1] and wa", False, True),
    ("Bees make honey [1].\nThey also make", False, True),  # the sentences style's answer is every line
    ("Bees make honey. Sources: [1", False, False),  # the cut fell in the sources, written on the answer's line
])
def test_answer_cut_says_whether_max_tokens_fell_in_the_answer(text, short, cut):
    assert answer_cut(text, "length", short) is cut
    assert answer_cut(text, "stop", short) is False


@pytest.mark.parametrize("text, span, cut", [
    # SmolLM2's reply to "what is photosynthesis?", stopped by the rag flow's max_tokens after its first sentence
    ("Photosynthesis is the process by which plants convert light energy into chemical energy. It",
     "the process by which plants convert light energy into chemical energy", False),
    ("The county population of 9,984 is", "9,984", True),  # its sentence cut: the note says it may end mid-sentence
    ("Aphids are small, wingless insects that", "Aphids are small, wingless", True),
    ("Aphids are small, wingless insects. They", "Aphids are small, wingless", False),
    ("Photosynthesis is the process by which plants convert light", "the process by which plants convert light",
     True),
    ("Photosynthesis is the process by which plants convert light.", "the process by which plants convert light",
     False),  # stopped right after the sentence's end
    ("Bees, [1] and wasps make", "Bees,   and wasps", True),  # a span not in the reply: its line decides
])
def test_a_short_answer_is_whole_when_the_reply_goes_on_past_the_end_of_its_sentence(text, span, cut):
    assert answer_cut(text, "length", True, span) is cut
    assert answer_cut(text, "length", False, span) is True  # the sentences style's answer is the whole reply
    assert answer_cut(text, "stop", True, span) is False


@pytest.mark.parametrize("reply, style, cut, answer", [
    ("Honey bees make honey [1].\nSources: 1", "sentences", False, "Honey bees make honey [1]."),
    ("Honey bees make honey [1] and", "sentences", True, "Honey bees make honey [1] and"),
    ("Honey bees.\nThe documents say", "short", False, "Honey bees"),
    ("Bumblebees and honeybees. It is", "short", False, "Bumblebees and honeybees"),
    ("Bumblebees and honeybees", "short", True, "Bumblebees and honeybees")])
def test_a_reply_stopped_at_max_tokens_marks_the_answer_cut_only_when_the_cut_fell_in_it(fault_models, reply, style,
                                                                                          cut, answer):
    fault_models.reply = reply
    op = create("generate.answer", {"model": "fault-length", "style": style}, step_id="answer")
    op(with_context(sample_results(1, 3)))
    meta = op.drain_metadata()["q1"]
    assert meta["finish_reason"] == "length" and meta["answer_cut"] is cut and meta["answer"] == answer


@pytest.mark.parametrize("model, reason", [("fault-error", "api"), ("fault-slow", "timeout"),
                                           ("fault-junk", "no usable text")])
def test_a_failure_keeps_the_rows_and_marks_the_query_degraded(fault_models, caplog, model, reason):
    op = create("generate.answer", {"model": model, "timeout": SLOW_TIMEOUT_S if model == "fault-slow" else 0.5,
                                    "num_retries": 0}, step_id="answer")
    table = with_context(sample_results(1, 3))
    with caplog.at_level(logging.WARNING):
        out = op(table)
    assert out.drop_columns(["cited"]).equals(table) and not any(out.column("cited").to_pylist())
    meta = op.drain_metadata()["q1"]
    assert meta["degraded"]["step"] == "answer" and reason in meta["degraded"]["reason"]
    assert "answer" not in meta and "keeps its input" in caplog.text
    usage = meta["usage"]["answer"]  # what the failed call cost, as cli.md says a degraded query has it
    assert usage["model"] == model and usage["calls"] == 1 and usage["seconds"] > 0
    assert usage.get("failed", 0) == (0 if model == "fault-junk" else 1)  # junk is a reply: tokens, not a failure


@pytest.mark.parametrize("blank", ["", "  ", None])
def test_an_empty_question_is_not_sent_and_degrades_its_query_alone(fault_models, blank):
    """An empty question was sent with its context; the model's reply to nothing ("The original document is
    missing") was kept as the answer."""
    table = with_context(sample_results(2, 2))
    table = table.set_column(table.column_names.index("query"), "query",
                             pa.array([blank, blank, "which insects make honey", "which insects make honey"]))
    op = create("generate.answer", {"model": "fault-ok", "question_column": "query"}, step_id="answer")
    out = op(table)
    meta = op.drain_metadata()
    assert out.num_rows == 4 and out.column("cited").to_pylist()[:2] == [False, False]
    assert "the question is empty" in meta["q1"]["degraded"]["reason"] and "answer" not in meta["q1"]
    assert meta["q2"]["answer"] == "Honey bees make honey [1]." and fault_models.attempts["ok"] == 1


def test_a_context_without_document_text_is_not_sent_and_degrades_its_query_alone(fault_models):
    """Every row cut by the context's budget (or rows without text) left the context empty, and the model answered
    from its own knowledge, kept as an answer from the documents."""
    table = with_context(sample_results(2, 2))
    contexts = table.column("context").to_pylist()
    table = table.set_column(table.column_names.index("context"), "context",
                             pa.array(["", ""] + contexts[2:]))
    op = create("generate.answer", {"model": "fault-ok"}, step_id="answer")
    out = op(table)
    meta = op.drain_metadata()
    assert out.num_rows == 4 and out.column("cited").to_pylist()[:2] == [False, False]
    assert "holds no document text" in meta["q1"]["degraded"]["reason"] and "answer" not in meta["q1"]
    assert meta["q2"]["answer"] == "Honey bees make honey [1]." and fault_models.attempts["ok"] == 1


def test_a_server_down_for_a_whole_batch_logs_a_few_queries_then_one_line(fault_models, caplog):
    """Each failed query is marked in the metadata; the log names the first few and says the rest go to debug,
    instead of a warning per query (a storm over hundreds of rows buried the run's own output)."""
    from operators.base import DEGRADED_WARNINGS

    op = create("generate.answer", {"model": "fault-error", "num_retries": 0}, step_id="answer")
    one = sample_results(1, 1)
    where = one.schema.get_field_index("qid")
    table = with_context(pa.concat_tables([one.set_column(where, "qid", pa.array([f"q{i}"]))
                                           for i in range(DEGRADED_WARNINGS + 4)]))
    with caplog.at_level(logging.WARNING, logger="operators.base"), op.recording() as notes:
        op(table)
    assert all("degraded" in meta for meta in notes.drain_metadata().values())
    lines = [record.getMessage() for record in caplog.records if record.name == "operators.base"]
    assert sum("keeps its input:" in line for line in lines) == DEGRADED_WARNINGS
    assert sum("the rest are logged at debug level" in line for line in lines) == 1 and len(lines) == 6


def test_on_error_error_fails_the_step(fault_models):
    op = create("generate.answer", {"model": "fault-error", "num_retries": 0, "on_error": "error"})
    with pytest.raises(OperatorError, match="query 'q1'"):
        op(with_context(sample_results(1, 2)))


def test_a_prompt_may_use_only_its_fields():
    with pytest.raises(Exception, match="may use"):
        create("generate.answer", {"prompt": "{question} {context}"})
    assert create("generate.answer", {"prompt": "Q: {query}\n{context}"}).prompts()["prompt"].startswith("Q:")


@pytest.mark.parametrize("op, prompt, needs", [
    ("generate.answer", "", "{query} or {context}"),  # the model answered its own text, recorded as the answer
    ("generate.answer", "Say something.", "{query} or {context}"),
    ("summarize.documents", "Summarize it.", "{text}"),  # no document sent
    ("summarize.documents", "Summarize for {query}.", "{text}"),
    ("summarize.results", "About {query}:", "{documents}"),
    ("analyze.relevance_marking", "Mark what answers {query}.", "{text}"),
    ("rerank.llm_tournament", "Which answers {query}?", "{documents}"),
])
def test_a_prompt_that_leaves_out_what_the_step_is_about_is_refused(op, prompt, needs):
    with pytest.raises(ParamsError) as err:
        create(op, {"prompt": prompt})
    assert err.value.field == "params.prompt" and f"the prompt must use {needs}" in str(err.value)


@pytest.mark.parametrize("op, prompt, says", [
    ("summarize.documents", "Summarize {text} {}", "a field with no name"),  # an IndexError once the step ran
    ("generate.answer", "Answer {query} from {0}: {context}", "the prompt uses ['0']"),  # refused before too
    ("summarize.results", "{documents} {query!x}", "Unknown conversion specifier x"),
    ("summarize.results", "{documents:d}", "Unknown format code 'd'"),
    ("query.keywords", "The {count:d} keywords of {query:>5}", None),  # a number's spec on the number: fine
    ("query.keywords", "The {count} keywords of {query:d}", "Unknown format code 'd'"),
    ("generate.answer", "{query} {{in braces}} {context!r}", None),
])
def test_a_prompt_its_fields_would_not_fill_is_refused_before_it_runs(op, prompt, says):
    """They passed the field checks and failed at the first call, after the retrieval in front of them (a chat's
    500), naming no param."""
    if says is None:
        assert create(op, {"prompt": prompt}).prompts()["prompt"] == prompt
        return
    with pytest.raises(ParamsError) as err:
        create(op, {"prompt": prompt})
    assert err.value.field == "params.prompt" and says in str(err.value), str(err.value)


def flow(temperature: float, **answer):
    from flows.spec import FlowSpec

    return FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context", "params": {"max_context_length": 300}},
        "answer": {"op": "generate.answer", "params": {"model": "fault-ok", "temperature": temperature, **answer}}}})


def test_cached_at_temperature_zero_and_never_above(fault_models, cache):
    from flows.executors.local import LocalExecutor

    table = sample_results(3, 2)
    first = LocalExecutor(cache=cache).run(flow(0.0), table)
    again = LocalExecutor(cache=cache).run(flow(0.0), table)
    assert fault_models.attempts["ok"] == 3 and again.steps["answer"].hits == 3
    assert again.metadata["q2"]["answer"] == first.metadata["q2"]["answer"]
    assert first.steps["answer"].usage["llm_calls"] == 3 and again.steps["answer"].usage == {}
    assert create("generate.answer", {"temperature": 0.7}).cacheable is False
    warm = LocalExecutor(cache=cache).run(flow(0.7), table)
    assert fault_models.attempts["ok"] == 6 and warm.steps["answer"].cached is False


def test_a_degraded_answer_is_not_cached(fault_models, cache):
    from flows.executors.local import LocalExecutor

    spec = flow(0.0, model="fault-error", num_retries=0)
    for _ in range(2):
        result = LocalExecutor(cache=cache).run(spec, sample_results(1, 2))
        assert result.metadata["q1"]["degraded"]["step"] == "answer"
    assert fault_models.attempts["error"] == 2 and result.steps["answer"].hits == 0


def test_an_uncited_answer_is_attributed_by_shared_words(fault_models):
    fault_models.reply = "Honey is made by bees, which pollinate flowers."
    table = with_context(sample_results(1, 3))
    texts = table.column("text").to_pylist()
    table = table.set_column(table.column_names.index("text"), "text",
                             pa.array([texts[0], "Bees make honey and pollinate flowers.", texts[2]]))
    op = create("generate.answer", {"model": "fault-ok"})
    out = op(table)
    meta = op.drain_metadata()["q1"]
    assert meta["sources_from"] == "overlap" and meta["sources"] == [table.column("docno")[1].as_py()]
    assert out.column("cited").to_pylist() == [False, True, False]


def architecture_pages(query: str) -> pa.Table:
    """One query over the sample's Gothic, Modern and Chinese architecture pages (numbered 1 to 3 in the context),
    which all say "architectural style"."""
    import json
    from pathlib import Path

    import operators

    pages = {(row := json.loads(line))["title"]: row for line in
             (Path(operators.__file__).parent / "testing_documents.jsonl").open()}
    rows = [pages[t] for t in ("Gothic architecture", "Modern architecture", "Chinese architecture")]
    return with_context(pa.table({"qid": ["q1"] * 3, "query": [query] * 3, "docno": [r["_id"] for r in rows],
                                  "title": [r["title"] for r in rows], "text": [r["text"] for r in rows],
                                  "score": [3.0, 2.0, 1.0], "rank": pa.array([1, 2, 3], pa.int32())}))


@pytest.mark.parametrize("reply, cited", [
    ("Chinese architecture developed an architectural style over millennia.", [False, False, True]),
    ("Gothic cathedrals are medieval architecture.", [False, False, False]),  # the question said back
    ("I don't know.", [False, False, False]),
])
def test_an_uncited_answer_is_attributed_by_its_distinctive_words(fault_models, reply, cited):
    """Not by the words the question, or most of the pages, hold: those say nothing about where it came from."""
    fault_models.reply = reply
    op = create("generate.answer", {"model": "fault-ok"})
    out = op(architecture_pages("gothic cathedrals and medieval architecture"))
    meta = op.drain_metadata()["q1"]
    assert out.column("cited").to_pylist() == cited
    assert meta["sources"] == [d for d, c in zip(out.column("docno").to_pylist(), cited) if c]
    assert meta["sources_from"] == ("overlap" if any(cited) else "none")


LOOP_AFTER_A_START = (
    "Bees are a group of social insects that are found in every continent except Antarctica. They are a type of insect "
    "that is part of the order Hymenoptera, which is a group of insects that have a segmented body. They are found in "
    "many different types of plants, and they are a type of insect that is part of the order Apoidea, which is a group "
    "of insects that are found in the order Insecta." + " They are a group of insects that are found in the order "
    "Insecta," + " which is a group of insects that are found in the order Insecta," * 11 + " which is a group")


@pytest.mark.parametrize("reply, reason", [
    ("[1] [2] [3] [4]", "only labels or citations"),
    ("[1] Aphid: 1\n[2] Aphid: 2\n[3] Aphid: 3\n[4] Aphid: 4", "repeats itself"),
    ("Bees make honey from nectar " + "and honey and honey " * 20, "repeats itself (85 words"),  # on one line
    (LOOP_AFTER_A_START, "repeats itself (118 words"),  # the embedded model's, asked about a task's rows: half a loop
])
def test_a_looping_or_empty_answer_is_junk(fault_models, reply, reason):
    fault_models.reply = reply
    op = create("generate.answer", {"model": "fault-ok"})
    op(with_context(sample_results(1, 2)))
    meta = op.drain_metadata()["q1"]
    assert reason in meta["degraded"]["reason"] and meta["raw_response"] == reply


def follow_up_results(messages_rows: bool) -> pa.Table:
    """A follow-up's results after query.contextualize and generate.context, with retrieve.messages' row of the
    earlier answer ranked first when ``messages_rows``."""
    import json

    docs = pa.table({"qid": ["1", "1"], "query": ["Is alcohol covered by it?"] * 2, "docno": ["exp#0", "leave#0"],
                     "text": ["Travel and expenses: the daily allowance is 45 euros; alcohol is not covered.",
                              "Leave policy: thirty days of annual leave, and sick leave on a doctor's note."],
                     "score": [2.0, 1.0], "rank": [1, 2],
                     "messages": [json.dumps([{"role": "user", "content": "What is the daily meal allowance?"},
                                              {"role": "assistant", "content": "45 euros"}])] * 2})
    table = create("query.contextualize", {})(docs)
    assert table.column("query")[0].as_py().startswith("Is alcohol covered by it? (What is the daily")
    if messages_rows:
        table = create("retrieve.messages", {})(table)
    return create("generate.context", {"max_context_length": 400})(table)


@pytest.mark.parametrize("messages_rows", [False, True])
def test_a_follow_ups_answer_is_read_against_the_question_as_asked(fault_models, messages_rows):
    """query.contextualize gives a follow-up its history form ("Is alcohol covered by it? (What is the daily meal
    allowance ...; 45 euros)"); the answer was read against it, so its words from the earlier turn counted as the
    question's: no source for an answer the expenses page holds, and the short answer not cut to its span. With
    retrieve.messages, whose row of the earlier answer (ranked first) has no original_query, it still was."""
    table = follow_up_results(messages_rows)
    assert table.column("docno")[0].as_py() == ("message-1" if messages_rows else "exp#0")
    fault_models.reply = "No, alcohol is not covered by it. The daily allowance is 45 euros"
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    op(table)
    meta = op.drain_metadata()["1"]
    assert meta["answer"] == "The daily allowance is 45 euros" and meta["sources"] == ["exp#0"], meta
