"""``preprocess.chunk {unit: tokens}`` (``ingest_static``'s chunking) counts a Chinese or Japanese character as a
token, as ``unit: words`` does (one rule, ``_chunk_units.unspaced_starts``): a run of such characters between two
punctuation marks was one token, so a chunk of 256 tokens held 256 clauses. Latin letters and digits beside them
are tokens of their own, punctuation is one token a mark, and a kanji keeps its variation selector."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.preprocess._chunk_units import unspaced_characters
from operators.registry import create

DOCUMENTS = {path.stem: path.read_text(encoding="utf-8") for path in (Path(__file__).parent / "cjk_documents").glob(
    "*.txt")}


def chunks(text: str, unit: str = "tokens", **params) -> list[str]:
    table = pa.table({"docno": ["d"], "text": [text]})
    return create("preprocess.chunk", {"unit": unit, **params})(table).column("text").to_pylist()


def characters(text: str) -> str:
    return "".join(c for c in text if c in unspaced_characters())


@pytest.mark.parametrize("name", ["zh_tea", "zh_wall", "ja_fuji"])
def test_a_chunk_of_tokens_holds_at_most_size_chinese_or_japanese_characters(name):
    text = DOCUMENTS[name]
    got = chunks(text, size=100, overlap=10)
    assert len(characters(text)) > 300
    assert all(len(characters(chunk)) <= 100 for chunk in got)
    assert len(got) >= len(characters(text)) // 100  # (the old code: a few chunks of several hundred characters)
    for before, after in zip(got, got[1:]):  # neighbours overlap by 10 tokens, so share the characters among them
        assert characters(after)[:3] in characters(before)[-10:]
    assert all(chunk in text for chunk in got)


def test_chinese_and_japanese_characters_are_tokens_of_their_own_and_latin_words_one_token():
    text = "富士山は標高3776メートル、iPhone（苹果）很贵。naïve text"
    assert chunks(text, size=1, overlap=0) == [
        "富", "士", "山", "は", "標", "高", "3776", "メ", "ー", "ト", "ル", "、", "iPhone", "（", "苹", "果", "）",
        "很", "贵", "。", "naïve", "text"]


@pytest.mark.parametrize("unit", ["tokens", "words"])
def test_a_kanji_keeps_its_variation_selector_and_a_kana_its_voicing_mark(unit):
    assert chunks("葛\U000E0100城は\u3099", unit, size=1, overlap=0) == ["葛\U000E0100", "城", "は\u3099"]


def test_spaced_text_and_korean_tokens_are_as_before():
    assert chunks("서울은 대한민국의 수도이다.", size=2, overlap=0) == ["서울은 대한민국의", "수도이다."]
    assert chunks("one two, (three) four", size=3, overlap=1) == ["one two,", ", (three", "three) four"]
