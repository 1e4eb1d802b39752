"""``preprocess.chunk {unit: words}`` counts a Chinese or Japanese character as a word: such text has no spaces, so a
whole paragraph was one "word" and a chunk of 256 words held 256 paragraphs (zh_tea.txt, its title and six paragraphs
of 96 to 129 characters, was 7 words). Spaced text, Korean's too, is cut at its spaces as before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.preprocess._chunk_units import unspaced_characters
from operators.registry import create

DOCUMENTS = {path.stem: path.read_text(encoding="utf-8") for path in (Path(__file__).parent / "cjk_documents").glob(
    "*.txt")}


def chunks(text: str, **params) -> list[str]:
    table = pa.table({"docno": ["d"], "text": [text]})
    return create("preprocess.chunk", {"unit": "words", **params})(table).column("text").to_pylist()


@pytest.mark.parametrize("name", ["zh_tea", "zh_wall"])  # (numbers written in characters)
def test_a_chunk_of_words_holds_size_chinese_or_japanese_characters(name):
    text = DOCUMENTS[name]
    got = chunks(text, size=100, overlap=10)
    characters = sum(c in unspaced_characters() for c in text)
    assert len(got) == 1 + -(-(characters - 100) // 90)  # windows of 100 advancing by 90
    assert all(sum(c in unspaced_characters() for c in chunk) <= 100 for chunk in got)
    assert sum(c in unspaced_characters() for c in got[0]) == 100
    for before, after in zip(got, got[1:]):  # consecutive chunks share 10 characters (and what follows them)
        shared = [c for c in after if c in unspaced_characters()][:10]
        assert "".join(c for c in before if c in unspaced_characters())[-10:] == "".join(shared)
    assert all(chunk in text for chunk in got)


def test_a_chinese_character_then_latin_letters_and_digits_are_words_of_their_own():
    assert chunks("富士山は標高3776メートル、iPhone（苹果）很贵。", size=3, overlap=0) == \
        ["富士山", "は標高", "3776メー", "トル、iPhone（", "苹果）很", "贵。"]


def test_spaced_text_and_korean_are_cut_at_their_spaces():
    korean = "서울은 대한민국의 수도이다. 한강이 도시를 가로질러 흐른다."
    assert chunks(korean, size=3, overlap=0) == ["서울은 대한민국의 수도이다.", "한강이 도시를 가로질러", "흐른다."]
    assert chunks("one two, three four five", size=2, overlap=0) == ["one two,", "three four", "five"]
