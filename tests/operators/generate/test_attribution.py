"""Source attribution of an uncited answer (operators/generate/attribution.py) on real texts: the sample corpus's
architecture and opera pages, where the answer's common words ("architecture", "style", "opera") occur in several
documents but only one holds the answer; answers that repeat the question or only say they do not know."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import operators
from operators.generate.attribution import attribute, containing

PAGES = {(row := json.loads(line))["title"]: row["text"]
         for line in (Path(operators.__file__).parent / "testing_documents.jsonl").open()}
ARCHITECTURE = "gothic cathedrals and medieval architecture"
OPERA = "opera composed in the nineteenth century"


def context(*titles: str) -> dict[int, str]:
    """The pages as generate.context numbers them, 1 first."""
    return {n: PAGES[title] for n, title in enumerate(titles, 1)}


BUILDINGS = context("Gothic architecture", "Modern architecture", "Leaning Tower of Pisa", "Chinese architecture")
OPERAS = context("Medieval music", "Carmen", "La bohème", "Hymn")


@pytest.mark.parametrize("answer, sources", [
    # "architectural style" is on the Gothic, Modern and Chinese pages; millennia and China on the last alone
    ("Chinese architecture developed an architectural style over millennia", [4]),
    ("Chinese architecture is an architectural style.", [4]),
    ("It is an architectural style of the late Middle Ages.", [1]),  # "late Middle Ages": the Gothic page's phrase
])
def test_the_page_that_holds_the_answer_not_those_sharing_its_common_words(answer, sources):
    assert attribute(answer, BUILDINGS, 0.3, ARCHITECTURE) == sources


def test_an_answer_from_two_pages_gets_both_and_the_page_of_the_questions_words_none():
    """Carmen's page names Bizet, La bohème's Puccini: each explains what the other does not. The medieval music
    and hymn pages share only "opera"/"composed" with it, the question's own words."""
    assert sorted(attribute("Carmen is by Georges Bizet and La bohème by Giacomo Puccini", OPERAS, 0.3, OPERA)) \
        == [2, 3]
    assert attribute("Carmen was first performed in Paris in 1875", OPERAS, 0.3, OPERA) == [2]


@pytest.mark.parametrize("answer, question, documents", [
    ("Gothic cathedrals are medieval architecture.", ARCHITECTURE, BUILDINGS),  # the question, said back
    ("The opera was composed in the nineteenth century", OPERA, OPERAS),
    ("It is not known.", ARCHITECTURE, BUILDINGS),  # "known" is on most of these pages
    ("I don't know.", ARCHITECTURE, BUILDINGS),
    ("The documents provided do not answer the question.", OPERA, OPERAS),
    ("Yes.", OPERA, OPERAS),
])
def test_an_answer_without_distinctive_words_has_no_sources(answer, question, documents):
    assert attribute(answer, documents, 0.3, question) == []
    assert containing(answer, documents, question) == []


def test_a_span_is_found_word_for_word_and_only_with_a_distinctive_word():
    texts = {1: "Boise lies in the Treasure Valley. Yes, a beetle.", 2: "Carmen is by Bizet.",
             3: "Gothic cathedrals are medieval architecture."}
    assert containing("the Treasure Valley", texts, ARCHITECTURE) == [1]
    assert containing("Bizet", texts, OPERA) == [2]
    assert containing("bee", texts, ARCHITECTURE) == []  # in "beetle", not as a word
    assert containing("medieval architecture", texts, ARCHITECTURE) == []  # the question's own words
