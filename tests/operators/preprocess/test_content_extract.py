"""preprocess.content_extract: contract, and main text kept / boilerplate dropped on page-like text."""

from __future__ import annotations

import json

import pyarrow as pa

from operators.preprocess.content_extract import split_segments
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract, sample_documents


def corpus_text(title: str) -> str:
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["title"] == title:
                return doc["text"]
    raise LookupError(title)


OPERA = corpus_text("Opera")
BEE = corpus_text("Bee")
# The Opera article in two paragraphs: its first two sentences, then the last two.
_SENTENCES = [OPERA[s.start:s.end] for s in split_segments(OPERA)]
PARAGRAPHS = [" ".join(_SENTENCES[:2]), " ".join(_SENTENCES[2:])]

HEADER = [
    "Skip to main content",
    "Home | News | Culture | Music | Theatre | Contact",
    "Search",
    "Log in   Register",
    "Culture › Music › Opera",
    "Opera",
    "By Staff Writer · 5 min read",
]
FOOTER = [
    "Share on Facebook",
    "Share on Twitter",
    "Related articles",
    "The ten best opera houses in Europe",
    "Why Verdi still matters",
    "Newsletter: Sign up for our weekly culture roundup.",
    "© 2024 Example Media. All rights reserved.",
    "Privacy policy · Terms of use · Cookie settings",
]
PAGE = "\n".join([*HEADER, *PARAGRAPHS, *FOOTER])


def extract(texts, **params):
    return create("preprocess.content_extract", params)(pa.table({"text": pa.array(texts, pa.string())}))


class TestContentExtractContract(OperatorContract):
    operator_name = "preprocess.content_extract"


def test_page_keeps_the_article_and_drops_the_boilerplate():
    assert len(_SENTENCES) == 4
    out = extract([PAGE]).column("text").to_pylist()[0]
    assert out == "\n".join(PARAGRAPHS)
    for line in HEADER + FOOTER:
        assert line not in out.splitlines()
    assert "Share on" not in out and "rights reserved" not in out and "Log in" not in out


def test_two_articles_separated_by_boilerplate_are_both_kept():
    page = "\n".join([*HEADER, OPERA, "Advertisement", "Read more", "Most popular", "Weather", BEE, *FOOTER])
    out = extract([page], min_words=30).column("text").to_pylist()[0]
    assert out == f"{OPERA}\n{BEE}"


def test_short_lines_inside_the_article_stay():
    page = "\n".join([*HEADER, PARAGRAPHS[0], "History", PARAGRAPHS[1], *FOOTER])
    out = extract([page]).column("text").to_pylist()[0]
    assert out == "\n".join([PARAGRAPHS[0], "History", PARAGRAPHS[1]])


def test_article_text_is_left_unchanged():
    docs = sample_documents(200).column("text").to_pylist()
    assert extract(docs).column("text").to_pylist() == docs


def test_boilerplate_only_page_uses_the_fallback():
    page = "\n".join(HEADER + FOOTER)
    assert extract([page]).column("text").to_pylist() == [page]
    assert extract([page], fallback="empty").column("text").to_pylist() == [""]


def test_short_texts_are_left_alone():
    texts = ["Home | About | Contact", "Opera is a form of theatre.", ""]
    assert extract(texts, fallback="empty").column("text").to_pylist() == texts


def test_threshold_and_window():
    # Demanding 40 words per sentence on average: the article does not qualify either.
    assert extract([PAGE], threshold=40, fallback="empty").column("text").to_pylist() == [""]
    # A window of one judges each sentence alone: the one-word heading between paragraphs goes.
    page = "\n".join([*HEADER, PARAGRAPHS[0], "History", PARAGRAPHS[1], *FOOTER])
    assert extract([page], window=1).column("text").to_pylist() == ["\n".join(PARAGRAPHS)]


def test_nulls_and_output_column():
    op = create("preprocess.content_extract", {"output_column": "main_text"})
    out = op(pa.table({"text": pa.array([PAGE, None], pa.string())}))
    assert op.produces() == {"main_text": "text"}
    assert out.column("text").to_pylist() == [PAGE, None]
    assert out.column("main_text").to_pylist() == ["\n".join(PARAGRAPHS), None]
