"""preprocess.chunk with ``tokenizer``: chunks counted in a model's word pieces fit the model that reads them."""

from __future__ import annotations

import json
import logging
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.errors import ParamsError
from operators.preprocess import _model_windows
from operators.preprocess._model_windows import model_tokenizer
from operators.registry import create
from operators.testing import sample_documents

MODEL = "all-MiniLM-L6-v2"
INGEST_SPEC = Path(__file__).parents[3] / "flows" / "specs" / "ingest.yaml"


def pieces(text: str) -> list[str]:
    return model_tokenizer(MODEL).encode(text, add_special_tokens=False).tokens


def chunk(texts, **params) -> pa.Table:
    table = pa.table({"docno": [f"d{i}" for i in range(len(texts))], "text": pa.array(texts, pa.string())})
    return create("preprocess.chunk", {"tokenizer": MODEL, **params})(table)


def assert_fits_and_covers(text: str, chunks: list[str], size: int, *, distinct: bool = True) -> None:
    """Every chunk is a verbatim stretch of at most ``size`` pieces (unless a word of the text is longer than that:
    cut between its pieces, a part read alone can make more); together they run from the text's first piece
    to its last. In a text without repeats (``distinct``) each chunk starts at or before where the one before it
    ended, so nothing between them is left out; otherwise their pieces are at least the text's."""
    assert all(c in text for c in chunks)
    if max(len(pieces(word)) for word in text.split()) <= size:
        assert all(len(pieces(c)) <= size for c in chunks)
    assert text.strip().startswith(chunks[0]) and text.rstrip().endswith(chunks[-1])
    if not distinct:
        assert sum(len(pieces(c)) for c in chunks) >= len(pieces(text))
        return
    position = 0
    for c in chunks:
        start = text.find(c, max(0, position - len(c)))
        assert 0 <= start and not text[position:start].strip()
        position = start + len(c)


def test_sample_documents_fit_and_are_covered():
    docs = sample_documents(40)
    out = create("preprocess.chunk", {"tokenizer": MODEL, "size": 48, "overlap": 8})(docs)
    texts = docs.column("text").to_pylist()
    assert out.num_rows > len(texts)  # the sample's passages are longer than 48 pieces
    for i, docno in enumerate(docs.column("docno").to_pylist()):
        rows = [r for r in out.to_pylist() if r["doc_id"] == docno]
        assert [r["chunk_index"] for r in rows] == list(range(len(rows)))
        assert {r["total_chunks"] for r in rows} == {len(rows)}
        assert_fits_and_covers(texts[i], [r["text"] for r in rows], 48)


def test_chunks_begin_and_end_at_words_and_share_the_overlap():
    text = " ".join(f"unbelievably{i} tokenization" for i in range(60))  # several pieces a word
    chunks = chunk([text], size=40, overlap=10).column("text").to_pylist()
    assert len(chunks) > 3
    words = set(text.split())
    for c in chunks:
        assert c.split()[0] in words and c.split()[-1] in words  # no half word at either end
    longest_word = max(len(pieces(word)) for word in words)
    for before, after in zip(chunks, chunks[1:]):  # the next chunk begins with the last whole words of this one
        shared = next(before[k:] for k in range(1, len(before))
                      if before[k - 1] == " " and after.startswith(before[k:]))
        assert 10 - longest_word < len(pieces(shared)) <= 10


def test_a_text_without_spaces_is_cut_between_pieces():
    """A line of Chinese is cut in pieces, as in regex tokens (each CJK character one, since preprocess.chunk v4)."""
    text = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(300))  # 300 distinct-ish CJK characters
    assert len(pieces(text)) > 200
    chunks = chunk([text], size=64, overlap=8).column("text").to_pylist()
    assert len(chunks) >= 4
    assert_fits_and_covers(text, chunks, 64)
    regex_chunks = create("preprocess.chunk", {"size": 64, "overlap": 8})(
        pa.table({"docno": ["d0"], "text": [text]})).column("text").to_pylist()
    assert len(regex_chunks) >= 4 and max(map(len, regex_chunks)) <= 64  # was one chunk, far past 64 tokens


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from("ab éx東 .,\n-"), max_size=200), min_size=1, max_size=4),
       size=st.integers(1, 16), data=st.data())
def test_any_text_fits_and_is_covered(texts, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    out = chunk(texts, size=size, overlap=overlap)
    for i, text in enumerate(texts):
        rows = [r["text"] for r in out.to_pylist() if r["doc_id"] == f"d{i}"]
        if not pieces(text):
            assert rows == [""]
            continue
        assert_fits_and_covers(text, rows, size, distinct=False)


def test_the_ingest_specs_chunks_with_their_titles_fit_what_minilm_reads():
    """The default ingestion's chunks, each embedded as "title. chunk", are never cut by the encoder."""
    from operators.models import resolve_model_path

    params = yaml.safe_load(INGEST_SPEC.read_text())["steps"]["chunk"]["params"]
    assert params["tokenizer"] == MODEL
    docs = sample_documents(60)
    out = create("preprocess.chunk", params)(docs)
    config = json.loads((resolve_model_path(MODEL) / "sentence_bert_config.json").read_text())
    reads = config["max_seq_length"] - 2  # less [CLS] and [SEP]
    titles = out.column("title").to_pylist() if "title" in out.column_names else [""] * out.num_rows
    for title, text in zip(titles, out.column("text").to_pylist()):
        assert len(pieces(f"{title}. {text}" if title else text)) <= reads


def test_tokenizer_with_another_unit_is_refused_naming_the_field():
    with pytest.raises(ParamsError) as error:
        create("preprocess.chunk", {"unit": "words", "tokenizer": MODEL})
    assert "params.tokenizer" in str(error.value) and "unit" in str(error.value)


def test_a_model_that_is_not_here_is_named():
    with pytest.raises(Exception) as error:
        chunk(["some text"], tokenizer="no-such-model-anywhere")
    assert "no-such-model-anywhere" in str(error.value)


@pytest.mark.integration
def test_the_embedder_says_once_that_texts_were_cut(caplog):
    embed = create("embed.sentence_transformer", {"model": MODEL}, step_id="embed")
    long_text = " ".join(["tokenization"] * 400)
    with caplog.at_level(logging.WARNING, logger="operators"):
        embed(pa.table({"text": [long_text, "short", long_text]}))
        embed(pa.table({"text": [long_text]}))
    notes = [r for r in caplog.records if "longer than" in r.getMessage()]
    assert len(notes) == 1 and getattr(notes[0], "note", False)
    assert "embed: 2 of 3 texts" in notes[0].getMessage() and "256" in notes[0].getMessage()
    assert "title" not in notes[0].getMessage()
    titled = create("embed.sentence_transformer", {"model": MODEL, "title_column": "title"}, step_id="titled")
    with caplog.at_level(logging.WARNING, logger="operators"):  # a text that fits, pushed over by its long title
        text, title = " ".join(["honey"] * 200), " ".join(["bee"] * 100)
        assert len(pieces(text)) == 200 and len(pieces(title)) == 100
        titled(pa.table({"text": [text], "title": [title]}))
    titled_notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("titled:")]
    assert len(titled_notes) == 1 and "after its 'title', which needs room too" in titled_notes[0]
    with caplog.at_level(logging.WARNING, logger="operators"):
        create("embed.sentence_transformer", {"model": MODEL}, step_id="fits")(pa.table({"text": ["short"] * 3}))
    assert not [r for r in caplog.records if "fits:" in r.getMessage()]


def test_a_tokenizer_folder_with_another_vocabulary_misses_the_cache(tmp_path):
    """The key held the tokenizer's name alone: a model folder trained again under the same path with another
    vocabulary (here: MiniLM's, then without the text's words, which become several pieces each) cuts other chunks,
    and a cached run replayed the old ones."""
    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec
    from operators.preprocess._model_windows import tokenizer_file

    folder = tmp_path / "my-encoder"
    folder.mkdir()
    original = json.loads(tokenizer_file(MODEL).read_text())
    (folder / "tokenizer.json").write_text(json.dumps(original))
    (folder / "config.json").write_text((tokenizer_file(MODEL).parent / "config.json").read_text())
    flow = FlowSpec.parse({"name": "chunks", "steps": {"read": {"op": "sources.jsonl", "params": {
        "path": str(tmp_path / "docs.jsonl")}}, "chunk": {"op": "preprocess.chunk", "params": {
            "unit": "tokens", "size": 16, "overlap": 0, "tokenizer": str(folder)}}}})
    words = "honey bees make nectar from flowers in their hives across europe".split()
    (tmp_path / "docs.jsonl").write_text(json.dumps({"_id": "d1", "text": " ".join(words * 4)}) + "\n")
    cache = StepCache(tmp_path / "cache")

    def chunks() -> tuple[list[str], int]:
        model_tokenizer.cache_clear()  # a new process reads the folder again
        result = LocalExecutor(cache=cache).run(flow)
        return result.table.column("text").to_pylist(), result.steps["chunk"].hits

    whole, hits = chunks()
    assert hits == 0 and chunks() == (whole, 1)
    for word in words:
        original["model"]["vocab"].pop(word, None)
    (folder / "tokenizer.json").write_text(json.dumps(original))
    split, hits = chunks()
    assert hits == 0 and len(split) > len(whole)  # computed with the new vocabulary: more pieces, more chunks


class _Recording:
    """The model's tokenizer, noting the length of every text it is given (to see how much it holds at once)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.batches = tokenizer, []

    def encode_batch(self, texts, **kwargs):
        self.batches.append([len(text) for text in texts])
        return self.tokenizer.encode_batch(texts, **kwargs)

    def get_vocab(self, **kwargs):
        return self.tokenizer.get_vocab(**kwargs)


def whole_text_windows(texts, size, overlap, monkeypatch):
    """``piece_windows`` with every text tokenized whole, in one batch: what the chunker did before slicing."""
    with monkeypatch.context() as whole:
        whole.setattr(_model_windows, "SLICE_CHARS", 10**12)
        whole.setattr(_model_windows, "BATCH_CHARS", 10**12)
        return windows(texts, model_tokenizer(MODEL), size, overlap)


def windows(texts, tokenizer, size, overlap):
    """``piece_windows`` with the piece ids of each chunk as a list (an array for a long text's)."""
    text_of, index, chunks, ids = _model_windows.piece_windows(texts, tokenizer, size, overlap, "##")
    return text_of, index, chunks, [None if i is None else list(map(int, i)) for i in ids]


def test_a_long_document_is_tokenized_in_bounded_slices_into_the_same_chunks(monkeypatch):
    """A document of megabytes (a book, a log) tokenized whole held some 150 bytes a character in the Rust tokenizer
    (8 MB: 1.2 GB): the tokenizer now gets slices of about ``SLICE_CHARS``, at most ``BATCH_CHARS`` at a time, and
    the chunks and their piece ids are those of the whole text."""
    texts = sample_documents(200).column("text").to_pylist()
    long_text = "\n".join(texts * 6)  # 590,000 characters: nine slices, more than a batch
    assert len(long_text) > _model_windows.BATCH_CHARS > 3 * _model_windows.SLICE_CHARS
    batch = [texts[0], long_text, texts[1]]
    recording = _Recording(model_tokenizer(MODEL))
    got = windows(batch, recording, 200, 32)
    assert max(max(lengths) for lengths in recording.batches) <= 2 * _model_windows.SLICE_CHARS
    assert max(sum(lengths) for lengths in recording.batches) <= _model_windows.BATCH_CHARS
    assert got == whole_text_windows(batch, 200, 32, monkeypatch)
    assert got[0].count(1) > 100 and sum(ids is not None for ids in got[3]) > 100


def test_slices_cut_inside_words_and_runs_of_spaces_give_the_whole_texts_pieces(monkeypatch):
    """Where a slice's nominal end falls inside a word or inside a run of spaces, it moves to the next single space
    between two words: the pieces (ids and offsets) are those of the text tokenized whole, and so are the chunks."""
    words = ["unbelievably", "naïve", "東京", "tokenization,", "(bees)", "x", "co-operate", "Гражда́нская"]
    gaps = [" ", "  ", " ", "\n\n", " ", " \t ", "   "]
    text = "".join(words[i % len(words)] + gaps[i % len(gaps)] for i in range(300))
    tokenizer, ends = model_tokenizer(MODEL), []
    whole = tokenizer.encode(text, add_special_tokens=False)
    expected = whole_text_windows([text], 24, 6, monkeypatch)
    for slice_chars in (40, 53, 64, 97):
        monkeypatch.setattr(_model_windows, "SLICE_CHARS", slice_chars)
        monkeypatch.setattr(_model_windows, "BATCH_CHARS", 3 * slice_chars)
        ends += [start + slice_chars for start, _ in _model_windows._slices(text)[:-1]]
        continues = _model_windows._ContinuationIds(tokenizer, "##")
        sliced = next(iter(_model_windows._encoded([text], tokenizer, continues)))
        assert sliced.ids.tolist() == whole.ids and sliced.offsets.tolist() == [list(o) for o in whole.offsets]
        assert sliced.continues.tolist() == [token.startswith("##") for token in whole.tokens]
        assert windows([text], tokenizer, 24, 6) == expected
    assert len(expected[0]) > 10
    assert any(text[end - 1].isalpha() and text[end].isalpha() for end in ends)  # a nominal end inside a word
    assert any(text[end - 1].isspace() and text[end].isspace() for end in ends)  # inside a run of spaces


def test_a_long_documents_pieces_are_held_once_while_it_is_cut(monkeypatch):
    """A long text's pieces (ids, offsets) were all held twice while its slices' were joined, with int64 offsets,
    and ``_cut_long`` made several arrays of the whole text's length of 8 bytes a piece: some 100 bytes a piece at
    the peak of Python's and numpy's allocations (over a short text's). Now about 30: int32 offsets, joined an
    array at a time, and only the long pieces' parts computed apart (docs/results.md: chunk_long_document)."""
    texts = sample_documents(200).column("text").to_pylist()
    long_text = "\n".join(texts * 2 + ["x" * 300])  # a piece of over LONG_UNIT_CHARS is cut into parts
    tokenizer = model_tokenizer(MODEL)
    pieces = len(tokenizer.encode(long_text, add_special_tokens=False).ids)
    monkeypatch.setattr(_model_windows, "SLICE_CHARS", 1 << 12)  # what one slice's encoding holds is a small part
    monkeypatch.setattr(_model_windows, "BATCH_CHARS", 1 << 13)
    peaks = []
    for text in (texts[0] * 3, long_text):  # the short one's: what does not grow with the text
        tracemalloc.start()
        try:
            _model_windows.piece_windows([text], tokenizer, 200, 32)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[1] - peaks[0] < 50 * pieces, (peaks[1] - peaks[0]) / pieces
