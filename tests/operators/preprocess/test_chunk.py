"""preprocess.chunk: contract, exact overlap and coverage per unit, ids, passthrough (its speed:
benchmarks/chunk_throughput.py)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.errors import MissingColumnsError, ParamsError
from operators.ids import content_doc_id
from operators.preprocess._chunk_units import unspaced_characters
from operators.registry import create
from operators.testing import OperatorContract, sample_documents

# Python's own tokenisation, which the vectorised one must match (texts without combining marks)
TOKEN = re.compile(r"\w+|[^\w\s]")


def units_of(text: str, unit: str) -> list[str]:
    if unit == "tokens":  # and each Chinese or Japanese character a token of its own
        return [u for token in TOKEN.findall(text) for u in _unspaced_tokens(token)]
    if unit == "words":  # spaced words; a Chinese or Japanese character, with the punctuation after it, a word too
        return [u for word in text.split() for u in _unspaced_words(word)]
    import punkt

    return punkt.PunktSentenceTokenizer(punkt.load_model("english")).tokenize(text)


def _unspaced_tokens(token: str) -> list[str]:
    cjk, units, after_cjk = unspaced_characters(), [], False
    for ch in token:
        if not units or ch in cjk or after_cjk:
            units.append(ch)
        else:
            units[-1] += ch
        after_cjk = ch in cjk
    return units


def _unspaced_words(word: str) -> list[str]:
    cjk, units, after_cjk = unspaced_characters(), [], False
    for ch in word:
        if not units or ch in cjk or (after_cjk and (ch.isalnum() or ch == "_")):
            units.append(ch)
        else:
            units[-1] += ch
        after_cjk = ch in cjk or (after_cjk and not (ch.isalnum() or ch == "_"))
    return units


def chunk(texts, **params) -> pa.Table:
    table = pa.table({"docno": [f"d{i}" for i in range(len(texts))], "text": pa.array(texts, pa.string())})
    return create("preprocess.chunk", params)(table)


def assert_overlap_and_coverage(text: str, chunks: list[str], unit: str, size: int, overlap: int) -> None:
    """Consecutive chunks share exactly ``overlap`` units, and the chunks, overlaps removed, are the text."""
    pieces = [units_of(c, unit) for c in chunks]
    assert all(len(p) <= size for p in pieces)
    for before, after in zip(pieces, pieces[1:]):
        assert len(before) == size
        assert before[size - overlap:] == after[:overlap]
    rebuilt = pieces[0] + [u for p in pieces[1:] for u in p[overlap:]]
    assert rebuilt == units_of(text, unit)


class TestChunkContract(OperatorContract):
    operator_name = "preprocess.chunk"

    def make_operator(self, **params):
        return create(self.operator_name, {"size": 40, "overlap": 8, **params})

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return sample_documents(n_queries * per_query)  # the chunker's input is documents


class TestSentenceChunkContract(TestChunkContract):
    def make_operator(self, **params):
        return create(self.operator_name, {"unit": "sentences", "size": 3, "overlap": 1, **params})


@pytest.mark.parametrize("unit, size, overlap", [
    ("tokens", 50, 10), ("tokens", 7, 0), ("words", 30, 29), ("words", 1, 0),
    ("sentences", 3, 1), ("sentences", 2, 0),
])
def test_overlap_and_coverage_on_real_documents(unit, size, overlap):
    docs = sample_documents(40)
    out = create("preprocess.chunk", {"unit": unit, "size": size, "overlap": overlap})(docs)
    texts = docs.column("text").to_pylist()
    for i, docno in enumerate(docs.column("docno").to_pylist()):
        rows = [r for r in out.to_pylist() if r["doc_id"] == docno]
        assert [r["chunk_index"] for r in rows] == list(range(len(rows)))
        assert {r["total_chunks"] for r in rows} == {len(rows)}
        assert_overlap_and_coverage(texts[i], [r["text"] for r in rows], unit, size, overlap)
        for r in rows:  # a chunk is a verbatim stretch of its document
            assert r["text"] in texts[i]


TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Mn", "Mc", "Me"))
    | st.sampled_from(" \n\t.,;()-'\u00a0é東😀。ア（서"),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=6),
    unit=st.sampled_from(["tokens", "words"]),
    size=st.integers(1, 12),
    data=st.data(),
)
def test_overlap_and_coverage_on_any_text(texts, unit, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    out = chunk(texts, unit=unit, size=size, overlap=overlap)
    for i, text in enumerate(texts):
        rows = [r for r in out.to_pylist() if r["doc_id"] == f"d{i}"]
        if not units_of(text, unit):
            assert [r["text"] for r in rows] == [""]
            continue
        assert_overlap_and_coverage(text, [r["text"] for r in rows], unit, size, overlap)


def test_ids_indices_and_passthrough():
    table = pa.table({
        "docno": ["a", None],
        "title": ["Alpha", "Beta"],
        "text": ["one two three four five", "six seven"],
        "url": ["u1", "u2"],
    })
    out = create("preprocess.chunk", {"unit": "words", "size": 3, "overlap": 1})(table)
    beta = content_doc_id("Beta", "six seven")
    assert out.to_pydict() == {
        "docno": ["a#0", "a#1", f"{beta}#0"],
        "title": ["Alpha", "Alpha", "Beta"],
        "text": ["one two three", "three four five", "six seven"],
        "url": ["u1", "u1", "u2"],
        "chunk_id": ["a#0", "a#1", f"{beta}#0"],
        "doc_id": ["a", "a", beta],
        "chunk_index": [0, 1, 0],
        "total_chunks": [2, 2, 1],
    }
    assert out.schema.field("chunk_index").type == pa.int32()
    assert out.schema.field("total_chunks").type == pa.int32()


def test_documents_without_docno_column_get_content_ids():
    out = create("preprocess.chunk", {"unit": "words", "size": 2, "overlap": 0})(
        pa.table({"title": ["T"], "text": ["w1 w2 w3"]}))
    doc_id = content_doc_id("T", "w1 w2 w3")
    assert out.column("doc_id").to_pylist() == [doc_id, doc_id]
    assert out.column("docno").to_pylist() == [f"{doc_id}#0", f"{doc_id}#1"]


def test_tokens_keep_spacing_and_treat_marks_as_word_characters():
    text = "Café  naïve—(नमस्ते दुनिया) 東京\n😀!"
    out = chunk([text], unit="tokens", size=3, overlap=1)
    assert out.column("text").to_pylist() == [
        "Café  naïve—", "—(नमस्ते", "नमस्ते दुनिया)", ") 東京", "京\n😀!",  # (each Chinese character a token)
    ]


def test_sentences_follow_punkt():
    text = "Dr. Smith arrived at 9 a.m. on Monday. He was tired! Was he late? No."
    out = chunk([text], unit="sentences", size=1, overlap=0)
    assert out.column("text").to_pylist() == ["Dr. Smith arrived at 9 a.m. on Monday.", "He was tired!",
                                              "Was he late?", "No."]


def test_empty_and_null_texts_stay_as_one_empty_chunk():
    out = chunk(["", "   ", None, "word"], unit="tokens", size=4, overlap=1)
    assert out.column("text").to_pylist() == ["", "", "", "word"]
    assert out.column("total_chunks").to_pylist() == [1, 1, 1, 1]


@pytest.mark.parametrize("params, field", [
    ({"size": 10, "overlap": 10}, "params.overlap"),
    ({"size": 10, "overlap": 12}, "params.overlap"),
    ({"size": 0}, "params.size"),
    ({"overlap": -1}, "params.overlap"),
    ({"unit": "paragraphs"}, "params.unit"),
    ({"unit": "sentences", "language": "klingon"}, "params.language"),
])
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ParamsError) as err:
        create("preprocess.chunk", params)
    assert err.value.field == field
    if field == "params.overlap" and params.get("overlap", 0) >= 10:
        assert "less than size" in str(err.value)


@pytest.mark.parametrize("unit, size", [("sentences", 2), ("words", 20), ("tokens", 32)])
def test_a_size_at_or_below_the_default_overlap_is_refused_naming_overlap(unit, size):
    """The default overlap (32) was not checked against size: sentences of 2 kept each document's first two
    sentences only (the rest of its text lost), words of 20 failed every document ('negative dimensions')."""
    with pytest.raises(ParamsError) as err:
        create("preprocess.chunk", {"unit": unit, "size": size})
    assert err.value.field == "params.overlap"
    assert f"overlap (32) must be less than size ({size})" in str(err.value) and "the default is 32" in str(err.value)
    out = create("preprocess.chunk", {"unit": unit, "size": size, "overlap": 0})(pa.table({
        "docno": ["d1"], "text": ["One two three. Four five six. Seven eight nine. Ten."]}))
    assert " ".join(out.column("text").to_pylist()).count("Ten") >= 1  # with an overlap that fits: all the text


def test_missing_text_column_is_named():
    with pytest.raises(MissingColumnsError, match="body"):
        create("preprocess.chunk", {"text_column": "body"})(pa.table({"text": ["x"]}))


@pytest.mark.parametrize("column", [pa.nulls(2, pa.null()), pa.array(["a b c d e", None], pa.string_view())],
                         ids=["every text null", "string_view"])
def test_a_text_column_every_value_of_which_is_null_or_a_string_view_is_chunked(column):
    """An all-null column read as Arrow's null type failed with 'ArrowInvalid: Invalid null value'; a string_view
    one with 'Function coalesce has no kernel'."""
    out = create("preprocess.chunk", {"unit": "words", "size": 3, "overlap": 1})(pa.table({"docno": ["d0", "d1"],
                                                                                         "text": column}))
    texts = out.column("text").to_pylist()
    assert out.column("doc_id").to_pylist()[-1] == "d1" and texts[-1] == ""  # a null text: one empty chunk
    assert texts[:-1] in ([""], ["a b c", "c d e"])
