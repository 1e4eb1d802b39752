"""A Chinese answer gets the document it came from as its source: ``rag`` over Chinese documents answered
百姓对繁重徭役的痛苦记 (from 长城's 孟姜女 paragraph) with ``sources: []``. The verbatim check wanted a word boundary
around the answer, which a Chinese clause never has (了百姓对...), and the word check read the answer and each clause
as one word each ("unicode" tokens), which never matched."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.generate.attribution import attribute, containing
from operators.registry import create

DOCUMENTS = Path(__file__).parents[1] / "preprocess" / "cjk_documents"
PAGES = {name: (DOCUMENTS / f"{name}.txt").read_text(encoding="utf-8").partition("\n\n")[2]
         for name in ("zh_tea", "zh_wall", "ja_fuji")}
TEXTS = {1: PAGES["zh_tea"], 2: PAGES["zh_wall"], 3: PAGES["ja_fuji"]}
QUESTION = "孟姜女为什么哭长城？"


@pytest.mark.parametrize("answer", ["百姓对繁重徭役的痛苦记忆", "百姓对繁重徭役的痛苦记", "丈夫被征去修长城，一去不回"])
def test_a_chinese_span_inside_a_clause_is_held_by_its_document(answer):
    assert containing(answer, TEXTS, QUESTION) == [2]


@pytest.mark.parametrize("answer, question, sources", [
    ("因为她的丈夫修长城时死了", QUESTION, [2]),  # reworded: the page's 丈夫, 修长城, 长城时
    ("陆羽写了《茶经》", "哪本书是第一部关于茶的专著？", [1]),
    ("宝永噴火、一七〇七年", "富士山の最後の噴火はいつ？", [3]),
])
def test_a_reworded_chinese_or_japanese_answer_is_attributed_by_its_pairs_of_characters(answer, question, sources):
    assert attribute(answer, TEXTS, 0.3, question) == sources


def test_english_spans_still_need_whole_words():
    texts = {1: "The honeybee makes honey.", 2: "Bees make honey."}
    assert containing("bee", texts, "which insect") == []
    assert containing("honeybee", texts, "which insect") == [1]


def test_the_short_answer_of_generate_answer_names_the_chinese_source(fault_models):
    fault_models.reply = "百姓对繁重徭役的痛苦记忆"
    rows = pa.table({"qid": ["q1"] * 3, "query": [QUESTION] * 3, "docno": ["zh_tea", "zh_wall", "ja_fuji"],
                     "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0], "title": ["茶", "长城", "富士山"],
                     "text": [PAGES["zh_tea"], PAGES["zh_wall"], PAGES["ja_fuji"]]})
    rows = create("generate.context", {"max_context_length": 2000})(rows)
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    op(rows)
    meta = op.drain_metadata()["q1"]
    assert meta["answer"] == "百姓对繁重徭役的痛苦记忆"
    assert meta["sources"] == ["zh_wall"] and meta["sources_from"] == "span"
