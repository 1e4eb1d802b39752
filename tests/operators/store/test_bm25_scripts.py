"""BM25 finds words of scripts written with combining marks (Devanagari and Tamil vowel signs, Arabic harakat), words
an invisible character sits in (a soft hyphen, a word joiner), words a zero-width space separates (Thai marks word
ends so), and Turkish words by the i a user types; an index made before these rules keeps cutting words as it was
built (``IndexSettings.tokens``)."""

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
    assert index.settings.tokens == "unicode"
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
