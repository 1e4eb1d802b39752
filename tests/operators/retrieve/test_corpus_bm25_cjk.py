"""retrieve.corpus_bm25 finds Chinese and Japanese rows for a query in their language: it cut words by the "unicode"
rule, where a run of Chinese between two punctuation marks is one word, so a question (one run too) matched no row
and the demo answered from nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from operators.registry import create

DOCUMENTS = Path(__file__).parents[1] / "preprocess" / "cjk_documents"


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "cjk.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for name in ("zh_tea", "zh_wall", "ja_fuji"):
            title, _, text = (DOCUMENTS / f"{name}.txt").read_text(encoding="utf-8").partition("\n\n")
            out.write(json.dumps({"_id": name, "title": title.strip(), "text": text}, ensure_ascii=False) + "\n")
    return corpus


def test_a_chinese_or_japanese_question_finds_the_row_that_answers_it(tmp_path):
    op = create("retrieve.corpus_bm25", {"corpus": str(_corpus(tmp_path)), "k": 3}, step_id="bm25")
    out = op(pa.table({"qid": ["meng", "luyu", "hoei"],
                       "query": ["孟姜女的故事是什么？", "陆羽写了什么书", "宝永噴火はいつ起きたか"]}))
    first = {row["qid"]: row["docno"] for row in out.to_pylist() if row["rank"] == 1}
    assert first == {"meng": "zh_wall", "luyu": "zh_tea", "hoei": "ja_fuji"}


def test_english_words_in_the_same_corpus_are_found_as_before(tmp_path):
    corpus = _corpus(tmp_path)
    with corpus.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "en", "title": "Tea", "text": "Tea is made of Camellia leaves."}) + "\n")
    out = create("retrieve.corpus_bm25", {"corpus": str(corpus), "k": 3}, step_id="bm25")(
        pa.table({"qid": ["q"], "query": ["camellia leaves"]}))
    assert out.column("docno").to_pylist() == ["en"]
