"""generate.context's ``sentences`` keeps the sentences of a Chinese passage that answer a Chinese query: they were
scored with the "unicode" BM25 tokens, where a clause written without spaces is one token that the query's words
never matched, so every passage kept its opening sentences whatever was asked."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.generate.sentences import best_sentences
from operators.registry import create

TEA = (Path(__file__).parents[1] / "preprocess" / "cjk_documents" / "zh_tea.txt").read_text(encoding="utf-8")
#: The paragraph on today's teas: its opening names the six kinds; the fourth sentence gives the yield.
TODAY = next(p for p in TEA.split("\n\n") if p.startswith("今天"))
YIELD = "据统计，二〇二〇年中国茶叶产量约为二百九十八万吨，占世界总产量的四成以上；茶叶出口到一百多个国家和地区。"
#: The paragraph on the Song dynasty: which emperor wrote on tea is its fourth sentence.
SONG = next(p for p in TEA.split("\n\n") if p.startswith("宋代"))
EMPEROR = "宋徽宗赵佶甚至亲自撰写了《大观茶论》，讨论点茶的技巧。"


def test_a_chinese_query_keeps_the_sentence_that_answers_it():
    assert YIELD in TODAY and not TODAY.startswith(YIELD)
    assert best_sentences(TODAY, "中国茶叶产量是多少？", 1) == YIELD
    assert best_sentences(SONG, "哪位皇帝写过关于点茶的书？", 1) == EMPEROR


@pytest.mark.parametrize("fit", ["rank", "share"])
def test_generate_context_with_sentences_picks_the_answer_of_each_chinese_passage(fit):
    rows = pa.table({"qid": ["q1", "q1"], "query": ["中国茶叶产量是多少？"] * 2, "docno": ["today", "song"],
                     "rank": [1, 2], "title": ["今天的茶", "宋代"], "text": [TODAY, SONG]})
    context = create("generate.context", {"sentences": 1, "fit": fit, "max_context_length": 512})(rows)
    text = context.column("context")[0].as_py()
    assert f"[Document 1] 今天的茶\n{YIELD}" in text
    assert "六大类" not in text  # the opening of the first passage, which does not answer


def test_english_passages_keep_the_same_sentences():
    text = ("Shirley Temple was an American actress. She was a popular child star. "
            "Later she served as Chief of Protocol of the United States.")
    assert best_sentences(text, "Which actress served as Chief of Protocol?", 1) == \
        "Later she served as Chief of Protocol of the United States."
