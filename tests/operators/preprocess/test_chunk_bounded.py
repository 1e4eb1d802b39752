"""preprocess.chunk keeps every chunk within a length in characters proportional to its ``size``, whatever the text:
a run of text without a space (a 5 MB file of 'aaaa…', a long URL, a base64 blob) was one regex token, one word,
one sentence, or one ``[UNK]`` piece of MiniLM's tokenizer (a word over 100 characters), so one chunk of the whole
run (the ingestion's chunker made 20,005 characters of ``"a" * 20000 + " word"`` one passage, and 5 MB one passage
of 5 MB); a long run of spaces between two words made one chunk of them too. Now such a unit is cut into parts of
``PART_CHARS`` characters (a sentence into parts of at most ``SENTENCE_PART_CHARS``), each counted as a unit, and
no chunk spans more than ``LONG_GAP_CHARS`` of spaces. Real text's chunks are the same (tests/operators/preprocess/
test_chunk.py and test_chunk_model_tokens.py, unchanged)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from operators.preprocess._chunk_units import LONG_GAP_CHARS, PART_CHARS, SENTENCE_PART_CHARS
from operators.preprocess._model_windows import model_tokenizer
from operators.registry import create

INGEST = yaml.safe_load((Path(__file__).parents[3] / "flows" / "specs" / "ingest.yaml").read_text())
INGEST_STATIC = yaml.safe_load((Path(__file__).parents[3] / "flows" / "specs" / "ingest_static.yaml").read_text())
MINILM = "all-MiniLM-L6-v2"

#: Each chunker, and the most characters one of its chunks of a run without spaces may have.
CHUNKERS = [
    pytest.param(INGEST["steps"]["chunk"]["params"], 200 * PART_CHARS, id="ingest-minilm-pieces"),
    pytest.param(INGEST_STATIC["steps"]["chunk"]["params"], 256 * PART_CHARS, id="ingest-static-regex-tokens"),
    pytest.param({"unit": "tokens", "size": 48, "overlap": 8, "tokenizer": MINILM}, 48 * PART_CHARS, id="pieces-48"),
    pytest.param({"unit": "words", "size": 100, "overlap": 10}, 100 * PART_CHARS, id="words"),
    pytest.param({"unit": "sentences", "size": 3, "overlap": 1}, 3 * SENTENCE_PART_CHARS + 2, id="sentences"),
]

URL = "https://example.com/files/" + "Zm9vYmFy" * 1250 + "?download=1"  # a 10 kB URL: a base64 path
RUNS = [
    pytest.param("a" * 20000 + " word", id="20000-letters"),
    pytest.param(f"See {URL} for the data.", id="10kB-url"),
    pytest.param("Honey bees make honey. " * 30 + "x" * 30000 + " Ants farm aphids.", id="run-amid-sentences"),
]


def chunks_of(text: str, params: dict) -> list[str]:
    table = pa.table({"docno": ["d0"], "text": pa.array([text], pa.string())})
    out = create("preprocess.chunk", params)(table)
    assert out.column("chunk_index").to_pylist() == list(range(out.num_rows))
    return out.column("text").to_pylist()


def assert_covers(text: str, chunks: list[str]) -> None:
    """Every chunk is a stretch of the text that starts at or before where the ones before it ended (spaces apart),
    and the last ends with the text's last non-space character."""
    covered = 0
    for chunk in chunks:
        skipped = len(text) - len(text[covered:].lstrip())  # the spaces after what is covered
        start = text.rfind(chunk, 0, skipped + len(chunk))  # the occurrence reaching furthest from there
        assert start >= 0, chunk[:50]
        covered = max(covered, start + len(chunk))
    assert not text[covered:].strip()


@pytest.mark.parametrize("text", RUNS)
@pytest.mark.parametrize("params, most", CHUNKERS)
def test_a_run_without_spaces_is_cut_into_chunks_of_bounded_length(params, most, text):
    chunks = chunks_of(text, params)
    assert len(chunks) > 1 and max(map(len, chunks)) <= most, (len(chunks), max(map(len, chunks)))
    assert_covers(text, chunks)


@pytest.mark.parametrize("params, most", CHUNKERS)
def test_a_megabyte_without_a_space_is_not_one_passage(params, most):
    """The 5 MB file's case at 1 MB: a run over 30 times the longest above, at least 333 chunks whatever ``most``
    (5 MB took the tokenizers' chunkers 2 s each; what is asserted does not depend on the size)."""
    text = "a" * 1_000_000 + " word"
    chunks = chunks_of(text, params)
    assert max(map(len, chunks)) <= most and len(chunks) >= len(text) // most
    assert chunks[-1].endswith("word") and sum(c.count("a") for c in chunks) >= 1_000_000


@pytest.mark.parametrize("params, most", CHUNKERS)
def test_no_chunk_spans_a_long_run_of_spaces(params, most):
    text = "Honey bees make honey. " + " " * (LONG_GAP_CHARS + most) + "\n Ants farm aphids."
    assert chunks_of(text, params) == ["Honey bees make honey.", "Ants farm aphids."]
    text = "Honey bees make honey. " + " " * 50 + "\n Ants farm aphids."  # a short run: one chunk, as before
    assert chunks_of(text, params) == [text.strip()]


def test_pieces_of_a_chunk_cut_inside_a_run_are_left_to_the_encoder():
    """With ``pieces_column``, a chunk's piece ids are the tokenizer's for its text, or null where the chunk begins or
    ends inside a run cut into parts (its own text would give other pieces)."""
    text = "honey bees make honey " * 40 + "b" * 3000 + " ants farm aphids " * 40
    out = create("preprocess.chunk", {"unit": "tokens", "size": 48, "overlap": 8, "tokenizer": MINILM,
                                      "pieces_column": "pieces"})(pa.table({"docno": ["d0"], "text": [text]}))
    rows = out.to_pylist()
    assert max(len(r["text"]) for r in rows) <= 48 * PART_CHARS
    inside = [r for r in rows if "bbb" in r["text"]]
    assert inside and all(r["pieces"] is None for r in inside if not r["text"].startswith("b" * 3000))
    whole = [r for r in rows if r["pieces"] is not None]
    assert len(whole) > 4
    for row in whole:
        assert row["pieces"] == model_tokenizer(MINILM).encode(row["text"], add_special_tokens=False).ids
