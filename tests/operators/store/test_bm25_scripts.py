"""BM25 finds words of scripts written with combining marks (Devanagari and Tamil vowel signs, Arabic harakat), words
an invisible character sits in (a soft hyphen, a word joiner), words a zero-width space separates (Thai marks word
ends so), Turkish words by the i a user types, and Chinese, Japanese and Korean words inside the unspaced text they
are written in; an index made before these rules keeps cutting words as it was built (``IndexSettings.tokens``)."""

from __future__ import annotations

import json

from operators.store import Index, IndexSettings

DOCS = [
    {"_id": "hindi", "text": "हिन्दी भारत की राजभाषा है"},
    {"_id": "tamil", "text": "தமிழ் ஒரு மொழி"},
    {"_id": "moon", "text": "القَمَرُ"},
    {"_id": "pen", "text": "القَلَمُ"},
    {"_id": "cairo", "text": "القَاهِرَةُ عَاصِمَةُ مِصْرَ"},
    {"_id": "i18n", "text": "inter\u00adnationalization of software"},
    {"_id": "joined", "text": "a hello\u2060world program"},
    {"_id": "thai", "text": "กรุงเทพ\u200bมหานคร"},
    {"_id": "istanbul", "text": "İstanbul Boğaz'ın yakasında"},
    {"_id": "igdir", "text": "Iğdır doğuda"},
    {"_id": "honey", "text": "bees make honey"},
]


def found(index: Index, query: str) -> list[str]:
    return index.search_bm25([query], 10)[0].docnos


def test_words_with_marks_and_invisible_characters_are_found_by_themselves(tmp_path, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(make_chunks(DOCS))
    assert index.settings.tokens == "cjk_bigrams"
    assert found(index, "हिन्दी") == ["hindi"]  # no token at all under \w\w+: the vowel signs cut it to letters
    assert found(index, "மொழி") == ["tamil"]
    assert found(index, "القَمَرُ") == ["moon"]  # under \w\w+ moon and pen tied: both were the token "الق"
    assert found(index, "القَاهِرَةُ") == ["cairo"]
    assert found(index, "internationalization") == ["i18n"]
    assert found(index, "helloworld") == ["joined"]
    assert found(index, "กรุงเทพ") == found(index, "มหานคร") == ["thai"]  # a zero-width space breaks words
    assert found(index, "istanbul") == found(index, "ISTANBUL") == ["istanbul"]  # İ lower-cased: i and a dot
    assert found(index, "IĞDIR") == ["igdir"]  # I lower-cased is no ı
    assert found(index, "honey bees") == ["honey"]


def test_an_index_made_before_keeps_its_words(tmp_path, make_chunks, capsys):
    """A manifest without ``tokens`` was written by an earlier release: its shards hold bm25s's terms, so its
    queries are cut the same way (a word found before is found still; one cut apart before stays as it was)."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False, tokens="bm25s"))
    index.add(make_chunks(DOCS))
    manifest = tmp_path / "idx" / "manifest.json"
    raw = json.loads(manifest.read_text(encoding="utf-8"))
    del raw["settings"]["tokens"]
    manifest.write_text(json.dumps(raw), encoding="utf-8")

    earlier = Index.open(tmp_path / "idx")
    assert earlier.settings.tokens == "bm25s"
    assert found(earlier, "भारत") == ["hindi"]
    assert found(earlier, "हिन्दी") == []
    assert sorted(found(earlier, "القَمَرُ")) == ["cairo", "moon", "pen"]  # each begins with the token "الق"
    assert found(earlier, "inter national") == ["i18n"]
    assert found(earlier, "istanbul") == []  # as before: "i̇stanbul" was cut after its dotted i
    from flows.commands import main

    assert main(["index", "info", str(tmp_path / "idx")]) == 0
    assert "tokens=bm25s" in capsys.readouterr().out  # the rule it keeps, beside its other BM25 settings


def test_a_stopword_list_is_read_as_the_text_is():
    """An entry in capitals with a dotted İ, in NFD or with a soft hyphen matched no token: the list is now read as
    the text is."""
    from operators.store import bm25

    settings = IndexSettings(dense=False, stopwords=["İÇİN", "cafe\u0301", "ev\u00adet"])
    assert bm25.tokenize_queries(["için café evet bilgi"], settings) == [["bilgi"]]


CJK = [
    {"_id": "duck", "title": "北京烤鸭", "text": "北京烤鸭是中国著名的菜肴，以其酥脆的鸭皮和鲜嫩的鸭肉而闻名。"},
    {"_id": "wall", "title": "长城", "text": "长城是中国古代的军事防御工程，全长超过两万公里。"},
    {"_id": "tower", "title": "東京タワー", "text": "東京タワーは東京都港区芝公園にある総合電波塔です。"},
    {"_id": "fuji", "title": "富士山", "text": "富士山は日本で最も高い山であり、標高は3776メートルです。"},
    {"_id": "seoul", "title": "서울", "text": "서울에서 만나요. 한강이 아름답습니다."},
    {"_id": "cat", "title": "", "text": "猫 と 犬"},
    {"_id": "honey", "title": "", "text": "bees make honey"},
]


def test_chinese_japanese_and_korean_words_are_found_inside_unspaced_text(tmp_path, make_chunks):
    """A run of CJK characters was one token: ``烤鸭`` (roast duck) found nothing in ``北京烤鸭是中国...``, ``港区``
    nothing in ``東京タワーは東京都港区...``; only a query of the whole run between two punctuation marks did."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(make_chunks(CJK))
    assert found(index, "烤鸭") == ["duck"]
    assert found(index, "鸭肉") == ["duck"]
    assert sorted(found(index, "中国")) == ["duck", "wall"]
    assert found(index, "港区") == ["tower"]
    assert found(index, "東京") == ["tower"]
    assert found(index, "メートル") == ["fuji"]  # katakana with its long-vowel mark ー, beside the digits
    assert found(index, "3776") == ["fuji"]
    assert found(index, "日本で一番高い山") == ["fuji"]  # a question's words, not written so in the text
    assert found(index, "서울") == ["seoul"]  # the particle 에서 ("in") is written onto the word
    assert found(index, "猫") == ["cat"]  # a character alone is a word
    assert found(index, "honey") == ["honey"]


def test_an_index_made_with_the_unicode_rule_keeps_its_whole_runs(tmp_path, make_chunks):
    """An index made before "cjk_bigrams" was the default holds each run as one term: its queries are cut so too."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False, tokens="unicode"))
    index.add(make_chunks(CJK))
    again = Index.open(tmp_path / "idx")
    assert again.settings.tokens == "unicode"
    assert found(again, "烤鸭") == []
    assert found(again, "北京烤鸭") == ["duck"]  # the title, a run of its own
