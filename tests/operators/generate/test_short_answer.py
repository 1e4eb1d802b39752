"""generate.answer's short-answer mode (``style: short``) and generate.context's best sentences: the example
turns sent, the span read from a reply, sources by the documents holding the span, short replies that are
answers (not junk), and the same on the real embedded model."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.generate.sentences import best_sentences
from operators.generate.short_answer import short_span
from operators.registry import create
from operators.testing import sample_queries, sample_results

QUESTION = "What is the population of the county where Ada is located?"


@pytest.mark.parametrize("reply, expected", [
    ("The county population of 9,984 is", "9,984"),  # the question's words around the answer go
    ("Answer: Yes.", "Yes"),
    ("The answer is: 1945 [1]\nReasoning: it says so.", "1945"),
    ("Greenwich Village, New York City", "Greenwich Village, New York City"),
    ("The population of the county is", "The population of the county is"),  # nothing new: kept as written
    ("Ada is located in the Treasure Valley", "the Treasure Valley"),  # a leading article stays, for readers
    ("The population is a million", "a million"),
    # a title's first word is a small word, dropped before: "Kill a Mockingbird is ..."
    ("To Kill a Mockingbird is a 1960 novel by Harper Lee", "To Kill a Mockingbird is a 1960 novel by Harper Lee"),
    ("Of Mice and Men", "Of Mice and Men"),
    ("In Boise, Idaho the county has 9,984 people", "Boise, Idaho the county has 9,984 people"),  # not a title
])
def test_short_span(reply, expected):
    assert short_span(reply, QUESTION) == expected


@pytest.mark.parametrize("reply, expected", [
    # the demo's question: the name after a lowercase last word is what that word qualifies, and stays (it went:
    # "... regions of northern"); "originated" is the question's "originate"
    ("The Gothic architecture originated in the Île-de-France and Picardy regions of northern France.",
     "the Île-de-France and Picardy regions of northern France"),
    ("It began in the north, France", "began in the north"),  # a comma between: the name is not the word's
    ("Gothic architecture began in the Paris Basin of France", "began in the Paris Basin"),  # after a name: cut
])
def test_a_span_keeps_the_name_its_last_word_qualifies(reply, expected):
    assert short_span(reply, "In which region of France did Gothic architecture originate?") == expected


@pytest.mark.parametrize("reply, question, expected", [
    # the web UI showed "Bees are insects that makes": the span stopped at the last word the question lacked
    ("Bees are insects that makes honey.", "Which insects produce honey?", "Bees are insects that makes honey"),
    ("Bees are insects that makes honey.", "Which insects make honey?", "Bees"),  # "makes" is the question's "make"
    # the clause's end is far: back to a name within the span ("Paris is the city where" before)
    ("Paris is the city where the painter of the portrait was living", "In which city was the painter of the "
     "portrait living?", "Paris"),
    # no name to go back to: the clause's end all the same ("delegates from" before)
    ("The treaty was signed by delegates from the two countries that fought the war",
     "Who signed the treaty between the two countries that fought the war?",
     "delegates from the two countries that fought the war"),
    # a verb the question's words follow ("... that owns" before)
    ("It was founded in 1969 by the company that owns the station", "When was the station founded?",
     "1969 by the company that owns the station"),
    # max_tokens cut the line mid-clause: back to where the clause ended ("Colisée, which" before)
    ("The Lewiston Maineiacs played their home games at the Androscoggin Bank Colisée, which is a",
     "The arena where the Lewiston Maineiacs played their home games can seat how many people?",
     "the Androscoggin Bank Colisée"),
    # a name's words count by their form, not their stem: "States" is not the question's "State"
    ("The country that has a population of 8 inhabitants is the United States.",
     "Brown State Fishing Lake is in a country that has a population of how many inhabitants ?",
     "8 inhabitants is the United States"),
])
def test_a_span_does_not_end_mid_phrase(reply, question, expected):
    assert short_span(reply, question) == expected


@pytest.mark.parametrize("style", ["sentences", "short"])
@pytest.mark.parametrize("reply", ["Yes.", "1945"])
def test_a_short_reply_is_an_answer_not_junk(fault_models, style, reply):
    fault_models.reply = reply
    op = create("generate.answer", {"model": "fault-ok", "style": style}, step_id="answer")
    op(create("generate.context")(sample_results(1, 2)))
    meta = op.drain_metadata()["q1"]
    assert "degraded" not in meta and meta["answer"].rstrip(".") == reply.rstrip(".")


def test_short_style_sends_example_turns_and_finds_its_sources(fault_models):
    fault_models.reply = "Honey bees [2]"
    table = sample_results(1, 3)
    texts = table.column("text").to_pylist()
    table = table.set_column(table.column_names.index("text"), "text",
                             pa.array([texts[0], "Honey Bees make honey.", texts[2]]))
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    out = op(create("generate.context")(table))
    meta = op.drain_metadata()["q1"]
    assert meta["answer"] == "Honey bees" and meta["sources_from"] == "span"
    assert meta["sources"] == [table.column("docno")[1].as_py()] and out.column("cited").to_pylist()[1]
    sent = fault_models.bodies[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert sent[2]["content"] == "Dublin" and sent[-1]["content"].startswith("Documents:\n[Document 1]")
    sentences = create("generate.answer", {"model": "fault-ok"}).cache_identity()
    assert op.cache_identity()["prompts"] != sentences["prompts"] and "examples" not in sentences


def test_closed_book_short_style_asks_the_question_alone(fault_models):
    op = create("generate.answer", {"model": "fault-ok", "style": "short", "context_column": None})
    op(sample_queries(1))
    sent = fault_models.bodies[-1]["messages"]
    assert all("Documents" not in m["content"] for m in sent) and sent[-1]["content"].startswith("Question: ")


TEXT = ("Shirley Temple was an American actress. She sang and danced. She later served as Chief of Protocol of "
        "the United States. She died in 2014.")


def test_best_sentences_keeps_the_matching_ones_in_text_order():
    assert best_sentences(TEXT, "Which actress served as Chief of Protocol?", 2) == \
        "Shirley Temple was an American actress. She later served as Chief of Protocol of the United States."
    assert best_sentences(TEXT, "zebra", 1) == "Shirley Temple was an American actress."  # no match: the opening
    assert best_sentences("One sentence.", "zebra", 2) == "One sentence."


def test_context_with_sentences_holds_only_the_best_ones():
    table = sample_results(1, 2)
    table = table.set_column(table.column_names.index("text"), "text", pa.array([TEXT, TEXT]))
    table = table.set_column(table.column_names.index("query"), "query", pa.array(["when did she die"] * 2))
    op = create("generate.context", {"sentences": 1})
    assert "query" in op.requires()
    context = op(table).column("context")[0].as_py()
    assert context.count("She died in 2014.") == 2 and "actress" not in context


@pytest.mark.slow
def test_the_embedded_model_answers_briefly_with_and_without_documents():
    """Slow: loads the embedded model and generates twice (about 5 s on an idle core). The 135M model gets a
    year's digits wrong at times ("1989" for 1889), so it is asked for a short answer, not the right one."""
    table = sample_results(1, 3)
    table = table.set_column(table.column_names.index("text"), "text",
                             pa.array(["The Eiffel Tower in Paris was completed in 1889.", *table["text"][1:]]))
    table = table.set_column(table.column_names.index("query"), "query",
                             pa.array(["In what year was the Eiffel Tower completed?"] * 3))
    op = create("generate.answer", {"model": "local", "max_tokens": 16, "style": "short"}, step_id="answer")
    op(create("generate.context", {"sentences": 2})(table))
    meta = op.drain_metadata()["q1"]
    assert "degraded" not in meta and 0 < len(meta["answer"].split()) <= 3, meta.get("raw_response")
    assert set(meta["sources"]) <= set(table.column("docno").to_pylist())
    # the documents that hold the answer, or those sharing its words; "none" when no document does (a wrong year)
    assert meta["sources_from"] in (("span", "overlap") if meta["sources"] else ("none",)), meta
    closed = create("generate.answer", {"model": "local", "max_tokens": 16, "style": "short",
                                        "context_column": None}, step_id="answer")
    closed(pa.table({"qid": ["q1"], "query": ["What is the capital of France?"]}))
    meta = closed.drain_metadata()["q1"]
    assert "degraded" not in meta and len(meta["answer"].split()) <= 3, meta.get("raw_response")


def test_a_short_answer_no_document_holds_verbatim_gets_its_sources_by_shared_words(fault_models):
    """The model reworded its answer (or max_tokens cut it off): no span, so the documents sharing its words."""
    fault_models.reply = "Aphids are the food of the order Hemip"
    table = sample_results(1, 3)
    texts = table.column("text").to_pylist()
    aphids = "Aphids are small sap-sucking insects in the family Aphididae of the order Hemiptera."
    table = table.set_column(table.column_names.index("text"), "text", pa.array([texts[0], texts[1], aphids]))
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    out = op(create("generate.context")(table))
    meta = op.drain_metadata()["q1"]
    assert meta["sources_from"] == "overlap" and meta["sources"] == [table.column("docno")[2].as_py()]
    assert out.column("cited").to_pylist() == [False, False, True]


@pytest.mark.parametrize("reply", ["1969", "Dublin."])
def test_an_example_answer_that_no_document_holds_degrades_and_one_they_hold_is_the_answer(fault_models, reply):
    """A small model that cannot answer from the documents repeats an example turn's answer: that is no answer."""
    fault_models.reply = reply
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    out = op(create("generate.context")(sample_results(1, 3)))
    meta = op.drain_metadata()["q1"]
    assert "answer" not in meta and "example answer" in meta["degraded"]["reason"], meta
    assert out.num_rows == 3 and not any(out.column("cited").to_pylist())
    table = sample_results(1, 2)
    texts = table.column("text").to_pylist()
    held = table.set_column(table.column_names.index("text"), "text",
                            pa.array([texts[0], "The archive was opened in Dublin in 1969."]))
    op(create("generate.context")(held))
    meta = op.drain_metadata()["q1"]
    assert meta["answer"] == reply.rstrip(".") and meta["sources"] == [held.column("docno")[1].as_py()], meta


def test_a_short_answer_that_no_document_holds_or_shares_words_with_has_no_sources(fault_models):
    fault_models.reply = "Zanzibar"
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    out = op(create("generate.context")(sample_results(1, 3)))
    meta = op.drain_metadata()["q1"]
    assert meta["answer"] == "Zanzibar" and meta["sources"] == [] and meta["sources_from"] == "none"
    assert out.column("cited").to_pylist() == [False, False, False]


def test_a_span_with_a_leading_article_is_found_without_it():
    from operators.generate.answer import containing
    texts = {1: "Boise lies in the west.", 2: "Ada County is in Treasure Valley.", 3: None}
    assert containing("the Treasure Valley", texts) == [2] and containing("The west", texts) == [1]


@pytest.mark.parametrize("closed_book", [True, False])
@pytest.mark.parametrize("reply", ["The first humans landed on the Moon",
                                   "The author of Dracula, Vlad Dracul, is a fictional character from the novel"])
def test_a_reply_about_an_example_turn_not_the_question_degrades(fault_models, closed_book, reply):
    """SmolLM2-135M asked "Welche Insekten machen Honig?" (or in Chinese) answered from the prompt's example turns,
    "The first humans landed on the Moon", which was kept as the answer; an answer the question or the documents
    share those words with is kept."""
    fault_models.reply = reply
    params = {"model": "fault-ok", "style": "short", **({"context_column": None} if closed_book else {})}
    op = create("generate.answer", params, step_id="answer")
    table = sample_results(1, 3)
    german = table.set_column(table.column_names.index("query"), "query",
                              pa.array(["Welche Insekten machen Honig?"] * 3))
    op(german if closed_book else create("generate.context")(german))
    meta = op.drain_metadata()["q1"]
    assert "answer" not in meta and "the model wrote about the prompt's example question" in \
        meta["degraded"]["reason"], meta
    asked = "Who wrote about the first humans on the Moon and the author of Dracula?"
    on_topic = table.set_column(table.column_names.index("query"), "query", pa.array([asked] * 3))
    op(on_topic if closed_book else create("generate.context")(on_topic))
    meta = op.drain_metadata()["q1"]
    assert "degraded" not in meta and meta["answer"], meta
