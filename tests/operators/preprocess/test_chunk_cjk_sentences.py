"""Chinese and Japanese sentences end at ``。！？``: Punkt's models end a sentence only before a space, so a Chinese or
Japanese document was one sentence, and ``preprocess.chunk {unit: sentences}`` made it one chunk (ja_fuji.txt: 791
characters, 771 MiniLM pieces, of which the encoder read 254), ``generate.context``'s ``fit: share`` cut its one
"first sentence" at a token; the ingestion's chunks of 200 MiniLM pieces were cut inside a word. English is split
as Punkt splits it, as before (``_cjk_sentences``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from operators.preprocess._chunk_units import chunk_sentence_spans, punkt_tokenizer, sentence_spans
from operators.preprocess._model_windows import model_tokenizer
from operators.registry import create

DOCUMENTS = {path.stem: path.read_text(encoding="utf-8") for path in (Path(__file__).parent / "cjk_documents").glob(
    "*.txt")}
INGEST = Path(__file__).parents[3] / "flows" / "specs" / "ingest.yaml"
#: A sentence of these documents: up to its stop and the closing quotes after it.
SENTENCE = re.compile(r"\s*(.*?[。！？][」』”’）]*)", re.S)


def sentences(text: str) -> list[str]:
    return SENTENCE.findall(text)


def chunks(text: str, **params) -> list[str]:
    table = pa.table({"docno": ["d"], "text": [text]})
    return create("preprocess.chunk", params)(table).column("text").to_pylist()


@pytest.mark.parametrize("name", ["zh_tea", "zh_wall", "ja_fuji"])
def test_chunks_of_sentences_of_chinese_and_japanese_end_at_their_stops_and_fit_the_encoder(name):
    text = DOCUMENTS[name]
    got = chunks(text, unit="sentences", size=4, overlap=1)
    assert len(got) >= 5, len(got)  # one chunk of the whole text before
    pieces = model_tokenizer("all-MiniLM-L6-v2")
    for chunk in got:
        assert re.search(r"[。！？][」』”）]*$", chunk), chunk[-10:]  # ends at a sentence's end
        assert 1 <= len(sentences(chunk)) <= 4 and len(chunk) <= 250, chunk
        assert len(pieces.encode(chunk).ids) <= 254  # what MiniLM reads beside its two markers
    for before, after in zip(got, got[1:]):  # neighbours share exactly one sentence
        assert sentences(before)[-1] == sentences(after)[0]
    kept = sentences(got[0]) + [s for chunk in got[1:] for s in sentences(chunk)[1:]]
    assert kept == sentences(text)  # and together they are the text


def test_closing_quotes_stay_with_their_sentence_and_a_pause_or_semicolon_ends_none():
    text = ("他想了想……说：“好吧！”大家都笑了。气温在山顶可能低于十度；轻装登山非常危险。"
            "新井白石は「雪のふるごとくになむありける」と書き残している。本当に？ Dr. Smith went home. He was tired.")
    got = [text[a:b] for a, b in sentence_spans(text, punkt_tokenizer("english"))]
    assert got == ["他想了想……说：“好吧！”", "大家都笑了。", "气温在山顶可能低于十度；轻装登山非常危险。",
                   "新井白石は「雪のふるごとくになむありける」と書き残している。", "本当に？", "Dr. Smith went home.",
                   "He was tired."]


def test_a_chinese_sentence_too_long_for_a_chunk_is_cut_after_a_clause_not_inside_one():
    body = re.sub(r"\s", "", DOCUMENTS["zh_wall"].partition("\n\n")[2])  # no title, no line breaks
    clauses = [s.rstrip("。！？") + "，" for s in sentences(body)]
    text = "据说，" + "".join(clauses * 4) + "完。"  # one sentence of some 2,500 characters
    assert len(text) > 2000
    spans = chunk_sentence_spans(text, punkt_tokenizer("english"))
    assert len(spans) > 1 and spans[-1][1] == len(text)
    for a, b in spans[:-1]:
        assert text[b - 1] in "，；、：" and b - a <= 1000, text[b - 10:b]  # old: cut at 1,000, mid-clause


def test_a_long_run_without_a_mark_is_cut_between_whole_characters():
    """A kanji with its variation selector (a name's form, ``葛󠄀``) is one character: the cut at 1,000 code points
    fell between them, and the next part began with a bare selector."""
    text = "葛\U000E0100飾" * 800 + "。"
    spans = chunk_sentence_spans(text, punkt_tokenizer("english"))
    assert len(spans) > 1
    for a, b in spans:
        assert text[a] != "\U000E0100" and b - a <= 2000, (a, b)


def test_fit_share_gives_each_chinese_or_japanese_passage_whole_sentences():
    names = ["zh_wall", "zh_tea", "ja_fuji"]
    table = pa.table({"qid": ["q1"] * 3, "query": ["长城"] * 3, "docno": names, "title": names,
                      "text": [DOCUMENTS[n] for n in names], "rank": pa.array([1, 2, 3], pa.int32())})
    out = create("generate.context", {"max_context_length": 400, "fit": "share"})(table)
    assert out.column("context_index").to_pylist() == [1, 2, 3]
    blocks = re.split(r"\[Document \d\] (\w+)\n", out.column("context")[0].as_py())[1:]
    assert blocks[::2] == names
    for name, text in zip(blocks[::2], blocks[1::2]):
        text = text.strip()
        assert not text.endswith("…") and re.search(r"[。！？][」』”）]*$", text), text[-20:]  # old: cut at a token
        assert " " not in text and re.sub(r"\s", "", DOCUMENTS[name]).startswith(re.sub(r"\s", "", text))  # its
        # opening sentences, joined as such text is written (no space between two)


@pytest.mark.parametrize("name", ["zh_tea", "ja_fuji"])
def test_the_default_chunks_of_a_long_paragraph_end_at_sentences_and_overlap(name):
    """The ingestion's chunker (200 MiniLM pieces) saw a paragraph of Chinese or Japanese as one word: one longer
    than a chunk was cut at its 200th piece (``氨|基酸``, amino acid, in two chunks) and neighbours shared nothing."""
    params = yaml.safe_load(INGEST.read_text(encoding="utf-8"))["steps"]["chunk"]["params"]
    text = re.sub(r"\s", "", DOCUMENTS[name].partition("\n\n")[2])  # one paragraph of some 700 characters
    table = pa.table({"docno": ["d"], "text": [text]})
    out = create("preprocess.chunk", {**params, "pieces_column": "ids"})(table)
    got, ids = out.column("text").to_pylist(), out.column("ids").to_pylist()
    pieces = model_tokenizer("all-MiniLM-L6-v2")
    assert len(got) >= 4
    at = [text.index(chunk) for chunk in got]
    for i, chunk in enumerate(got):
        assert ids[i] == pieces.encode(chunk, add_special_tokens=False).ids and len(ids[i]) <= 200
        assert at[i] == 0 or text[at[i] - 1] in "。！？，；、：”」"  # starts at a sentence's or a clause's start
        assert i == len(got) - 1 or re.search(r"[。！？][」』”）]*$", chunk), chunk[-10:]  # ends at a sentence's end
        assert i == 0 or at[i] < at[i - 1] + len(got[i - 1])  # shares its start with the chunk before
    assert name != "zh_tea" or any("氨基酸" in chunk for chunk in got)


@pytest.mark.data
def test_english_sentences_are_punkts_own_on_real_text(shared_data):
    """Every text of the Wikipedia corpus is split exactly as Punkt splits it: no boundary added or moved."""
    tokenizer = punkt_tokenizer("english")
    with open(shared_data / "wikipedia_vital10k_ovos" / "corpus.jsonl", encoding="utf-8") as corpus:
        texts = [json.loads(line)["text"] for line in corpus]
    assert len(texts) > 10000
    for text in texts:
        assert sentence_spans(text, tokenizer) == (list(tokenizer.span_tokenize(text)) if text.strip() else [])
