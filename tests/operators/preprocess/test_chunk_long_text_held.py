"""preprocess.chunk with ``tokenizer`` on a text of megabytes: cut as its pieces come, into the same chunks."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from operators.preprocess import _model_windows
from operators.preprocess._model_windows import model_tokenizer
from operators.testing import sample_documents

MODEL = "all-MiniLM-L6-v2"
CJK = Path(__file__).parent / "cjk_documents"


def windows(texts, size, overlap):
    """``piece_windows`` with each chunk's piece ids as a list."""
    text_of, index, chunks, ids = _model_windows.piece_windows(texts, model_tokenizer(MODEL), size, overlap, "##")
    return text_of, index, chunks, [None if i is None else list(map(int, i)) for i in ids]


def long_text(copies: int) -> str:
    """Real English texts joined, with a word of 3,000 letters (cut into parts) and a run of 1,500 spaces (a break)."""
    texts = sample_documents(200).column("text").to_pylist()
    return "\n".join(texts * copies + ["x" * 3000, " " * 1500, *texts[:20]])


@pytest.mark.parametrize("held", [97, 700, 4099])
def test_a_long_text_cut_as_its_pieces_come_gives_the_chunks_of_all_its_pieces_at_once(monkeypatch, held):
    """Windows made each time ``HELD_PIECES`` wait, from the next window's first piece on, are those made over all
    the text's pieces at once, piece ids included: across a word cut into parts, a long gap, Chinese and Japanese
    sentence ends, and texts of one slice beside it."""
    cjk = "".join(path.read_text(encoding="utf-8") for path in sorted(CJK.glob("*.txt")))
    texts = ["short one", long_text(1), cjk * 3, "", " " * 70_000 + "end"]
    monkeypatch.setattr(_model_windows, "SLICE_CHARS", 5000)
    monkeypatch.setattr(_model_windows, "BATCH_CHARS", 20_000)
    for size, overlap in ((200, 32), (24, 6)):
        monkeypatch.setattr(_model_windows, "HELD_PIECES", 10**12)
        expected = windows(texts, size, overlap)
        monkeypatch.setattr(_model_windows, "HELD_PIECES", held)
        assert windows(texts, size, overlap) == expected
        assert expected[0].count(1) > 100 and expected[0].count(2) > 10
        assert sum(ids is None for ids in expected[3]) >= 1  # chunks inside the cut word


def test_what_a_long_text_holds_beside_its_chunks_does_not_grow_with_it(monkeypatch):
    """A 50 MB text held all its pieces (ids, offsets: 13 bytes a piece) and its windows' arrays (12 more) at once,
    400 MB beside its chunks. Now only ``HELD_PIECES`` of them wait: what Python and numpy allocate beyond the chunks
    and their piece ids (tracemalloc's peak less what is held after) grows by under a byte for each character added
    to the text (it grew by some 5)."""
    monkeypatch.setattr(_model_windows, "SLICE_CHARS", 1 << 12)
    monkeypatch.setattr(_model_windows, "BATCH_CHARS", 1 << 14)
    monkeypatch.setattr(_model_windows, "HELD_PIECES", 1 << 12)
    tokenizer, beside, lengths = model_tokenizer(MODEL), [], []
    _model_windows.piece_windows([long_text(1)], tokenizer, 200, 32, "##")  # what a first call sets up, once
    for copies in (8, 32):
        text = long_text(copies)
        tracemalloc.start()
        try:
            got = _model_windows.piece_windows([text], tokenizer, 200, 32, "##")
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(got[2]) > 100 * copies
        beside.append(peak - current)
        lengths.append(len(text))
    assert beside[1] - beside[0] < lengths[1] - lengths[0], (beside, lengths)
