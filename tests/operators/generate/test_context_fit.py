"""generate.context's fit: share gives every passage a block within an equal share of the budget, cut at whole
sentences, where fit: rank fills the budget in rank order and leaves the last passages out. Real text: the five
passages hybrid retrieval might rank for a HotpotQA dev question (its paragraphs, CC BY-SA), the two gold ones
(Kiss and Tell, Shirley Temple) last."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.preprocess._chunk_units import punkt_tokenizer, sentence_spans
from operators.registry import create

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
PASSAGES = [
    ("hp000000", "Meet Corliss Archer", "Meet Corliss Archer, a program from radio's Golden Age, ran from January 7, "
     "1943 to September 30, 1956.  Although it was CBS's answer to NBC's popular \"A Date with Judy\", it was also "
     "broadcast by NBC in 1948 as a summer replacement for \"The Bob Hope Show\".  From October 3, 1952 to June 26, "
     "1953, it aired on ABC, finally returning to CBS.  Despite the program's long run, fewer than 24 episodes are "
     "known to exist."),
    ("hp000003", "Meet Corliss Archer (TV series)", "Meet Corliss Archer is an American television sitcom that aired "
     "on CBS (July 13, 1951 - August 10, 1951) and in syndication via the Ziv Company from April to December 1954.  "
     "The program was an adaptation of the radio series of the same name, which was based on a series of short "
     "stories by F. Hugh Herbert."),
    ("hp000005", "A Kiss for Corliss", "A Kiss for Corliss is a 1949 American comedy film directed by Richard Wallace "
     "and written by Howard Dimsdale.  It stars Shirley Temple in her final starring role as well as her final film "
     "appearance.  It is a sequel to the 1945 film \"Kiss and Tell\".  \"A Kiss for Corliss\" was retitled \"Almost "
     "a Bride\" before release and this title appears in the title sequence.  The film was released on November 25, "
     "1949, by United Artists."),
    ("hp000006", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 American comedy film starring then "
     "17-year-old Shirley Temple as Corliss Archer.  In the film, two teenage girls cause their respective parents "
     "much concern when they start to become interested in boys.  The parents' bickering about which girl is the "
     "worse influence causes more problems than it solves."),
    ("hp000001", "Shirley Temple", "Shirley Temple Black (April 23, 1928 – February 10, 2014) was an American "
     "actress, singer, dancer, businesswoman, and diplomat who was Hollywood's number one box-office draw as a child "
     "actress from 1935 to 1938.  As an adult, she was named United States ambassador to Ghana and to "
     "Czechoslovakia and also served as Chief of Protocol of the United States."),
]


def results() -> pa.Table:
    docnos, titles, texts = zip(*PASSAGES)
    return pa.table({"qid": ["q1"] * 5, "query": [QUESTION] * 5, "docno": list(docnos), "title": list(titles),
                     "text": list(texts), "rank": pa.array(range(1, 6), pa.int32())})


def blocks(context: str) -> dict[str, str]:
    """Each block's text by its title."""
    out = {}
    for block in context.split("\n\n"):
        header, _, text = block.partition("\n")
        out[header.split("] ", 1)[1]] = text
    return out


def sentences_of(text: str) -> set[str]:
    return {text[a:b].strip() for a, b in sentence_spans(text, punkt_tokenizer("english"))}


@pytest.fixture(scope="module")
def tokens():
    context = create("generate.context")
    context.setup()
    return context._count


def test_share_puts_both_gold_paragraphs_in_the_prompt_that_rank_leaves_out(tokens):
    params = {"max_context_length": 256, "sentences": 2}
    ranked = create("generate.context", {**params, "fit": "rank"})(results())
    assert ranked.column("context_index").to_pylist() == [1, 2, 3, None, None]  # the two gold paragraphs are out
    shared = create("generate.context", {**params, "fit": "share"})(results())
    assert shared.column("context_index").to_pylist() == [1, 2, 3, 4, 5]
    context = shared.column("context")[0].as_py()
    assert tokens(context) <= 256
    texts = dict(zip([t for _, t, _ in PASSAGES], [x for _, _, x in PASSAGES]))
    for title, block in blocks(context).items():  # whole sentences of its own passage, at most two, none cut
        kept = sentences_of(block)
        assert 1 <= len(kept) <= 2 and kept <= sentences_of(texts[title]) and "…" not in block, title
    assert "Shirley Temple as Corliss Archer" in blocks(context)["Kiss and Tell (1945 film)"]


def test_share_cuts_at_a_token_only_where_not_one_sentence_fits(tokens):
    table = results().slice(0, 2)
    out = create("generate.context", {"max_context_length": 64, "fit": "share"})(table)
    context = out.column("context")[0].as_py()
    assert out.column("context_index").to_pylist() == [1, 2] and tokens(context) <= 66
    shown = blocks(context)
    assert shown["Meet Corliss Archer"].endswith(" …")  # its first sentence alone is over its 32 tokens
    whole = create("generate.context", {"max_context_length": 160, "fit": "share"})(table).column("context")[0]
    opening = blocks(whole.as_py())["Meet Corliss Archer"]  # whole texts: its first sentences, as many as fit
    assert opening.startswith("Meet Corliss Archer, a program") and opening.endswith("\"The Bob Hope Show\".")
    assert len(sentences_of(opening)) == 2 and sentences_of(opening) < sentences_of(PASSAGES[0][2])


def test_share_leaves_out_the_rows_a_share_would_starve():
    out = create("generate.context", {"max_context_length": 64, "fit": "share", "min_block_tokens": 32})(results())
    assert out.column("context_index").to_pylist() == [1, 2, None, None, None]


@pytest.mark.parametrize("fit", ["rank", "share"])
def test_a_budget_below_min_block_tokens_leaves_every_row_out_with_either_fit(fit):
    """share gave the best row a block cut to "[ …" below min_block_tokens, numbered 1 as if the model could read it;
    rank left it out."""
    out = create("generate.context", {"max_context_length": 8, "fit": fit, "min_block_tokens": 32})(results())
    assert out.column("context_index").to_pylist() == [None] * 5 and out.column("context")[0].as_py() == ""
