"""An encoder's inputs composed from the chunker's piece ids (operators/models/piece_inputs.py) are the tokenizer's
own, on the Wikipedia passages that ship with the operators chunked as the ``ingest`` spec chunks them, with their
titles, with none, and beside chunks that come without pieces; the vectors are the same bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

import operators
from operators import create
from operators.errors import SpecError
from operators.models.fast_tokens import batching
from operators.models.piece_inputs import PieceComposer
from operators.preprocess._model_windows import model_tokenizer

PASSAGES = Path(operators.__file__).parent / "testing_documents.jsonl"
MINILM = "all-MiniLM-L6-v2"
#: A word of 81 characters: more pieces than a chunk of 8 holds, so a window cuts it between its pieces.
LONG_WORD = "x" + "y" * 80


def _documents() -> pa.Table:
    rows = [json.loads(line) for line in PASSAGES.read_text(encoding="utf-8").splitlines()]
    rows += [{"_id": "untitled", "title": "", "text": rows[0]["text"]},
             {"_id": "long-word", "title": "A word too long", "text": f"before {LONG_WORD} after"},
             {"_id": "long-title", "title": "Honey bees of the meadow " * 15,  # with a chunk, past 254 pieces
              "text": max((r["text"] for r in rows), key=len)}]
    return pa.table({"docno": [r["_id"] for r in rows], "title": [r["title"] for r in rows],
                     "text": [r["text"] for r in rows]})


def _encoder_tokenizer(source: Tokenizer | None = None) -> Tokenizer:
    """MiniLM's tokenizer as the embedder's fast path sets it up: truncating at 256, padding a batch."""
    return batching(Tokenizer.from_str((source or model_tokenizer(MINILM)).to_str()), 256)


def _chunks(size: int = 200, overlap: int = 32) -> pa.Table:
    chunk = create("preprocess.chunk", {"unit": "tokens", "size": size, "overlap": overlap, "tokenizer": MINILM,
                                        "pieces_column": "_pieces"})
    return chunk(_documents())


def test_each_chunks_pieces_are_the_tokenizers_pieces_of_its_text_unless_a_word_was_cut():
    rows = _chunks(size=8, overlap=2)
    tokenizer = model_tokenizer(MINILM)
    pieces, texts = rows.column("_pieces").to_pylist(), rows.column("text").to_pylist()
    cut = [text for text, ids in zip(texts, pieces) if ids is None]
    assert cut and all("y" in text for text in cut)  # only the windows inside the long word
    assert all(ids == tokenizer.encode(text, add_special_tokens=False).ids
               for text, ids in zip(texts, pieces) if ids is not None)
    assert len(cut) < len(texts) // 10
    with pytest.raises(SpecError, match="pieces_column"):
        create("preprocess.chunk", {"unit": "tokens", "pieces_column": "_pieces"})


def test_composed_inputs_are_the_tokenizers_own_ids_of_title_dot_chunk():
    encoder_tokenizer = _encoder_tokenizer()
    composer = PieceComposer.of(encoder_tokenizer, 256)
    assert composer is not None
    rows = _chunks()
    titles, texts = rows.column("title").to_pylist(), rows.column("text").to_pylist()
    bodies = composer.bodies(titles, rows.column("_pieces").to_pylist())
    joined = [f"{title}. {text}" if title else text for title, text in zip(titles, texts)]
    expected = [e.ids[:sum(e.attention_mask)] for e in _encoder_tokenizer().encode_batch_fast(joined)]
    assert sum(body is not None for body in bodies) == len(bodies) and "" in titles
    assert [composer.input_ids(body)[0] for body in bodies] == expected
    assert max(map(len, expected)) == 256  # a title and chunk past what MiniLM reads: cut as the tokenizer cuts


def test_other_tokenizers_are_tokenized_from_their_text():
    spec = json.loads(model_tokenizer(MINILM).to_str())
    spec["pre_tokenizer"] = {"type": "Whitespace"}  # splits otherwise than BERT: composing is not known to hold
    assert PieceComposer.of(_encoder_tokenizer(Tokenizer.from_str(json.dumps(spec))), 256) is None
    left = _encoder_tokenizer()
    left.enable_padding(direction="left", pad_id=0, pad_token="[PAD]")
    assert PieceComposer.of(left, 256) is None


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_vectors_from_pieces_are_the_vectors_from_text_bit_for_bit():
    rows = _chunks(size=48, overlap=8)  # more chunks, a few of them cut inside the long word
    embed = create("embed", {"title_column": "title", "encode_batch_size": 16})
    bodies = embed.piece_bodies(rows, "_pieces")
    assert bodies is not None and None in bodies  # a batch mixes composed and tokenized rows
    texts = embed.texts(rows)
    assert np.array_equal(embed.encode(texts), embed.encode(texts, bodies))
    prompted = create("embed", {"title_column": "title", "prompt": "passage: "})
    assert prompted.piece_bodies(rows, "_pieces") is None  # a prompt is not in the pieces
