"""generate.context cuts the block that does not fit at a whole character: the embedded model's tokenizer writes a
CJK character, an emoji or a Devanagari letter in several byte tokens, and a cut between them sent U+FFFD (``�``) to
the model as part of the document."""

from __future__ import annotations

import pyarrow as pa
import pytest
import regex

from operators.registry import create

TEXTS = {
    "zh": "北京烤鸭是中国著名的菜肴，以其酥脆的鸭皮和鲜嫩的鸭肉而闻名。长城是中国古代的军事防御工程。" * 4,
    "emoji": "We ate 🍕🍕 and drank ☕ with the 👩‍👩‍👧‍👦 family, flags 🇯🇵🇫🇷 on the wall. " * 4,
    "hi": "हिन्दी भारत की सबसे अधिक बोली जाने वाली भाषा है। " * 4,
}


def _rows(text: str) -> pa.Table:
    return pa.table({"qid": ["q1"], "query": ["q"], "docno": ["d1"], "rank": [1], "title": ["t"], "text": [text]})


@pytest.mark.parametrize("script", sorted(TEXTS))
def test_a_block_cut_to_the_budget_ends_at_a_whole_character(script):
    text = TEXTS[script]
    ends = {0} | {match.end() for match in regex.finditer(r"\X", text)}  # where each grapheme cluster ends
    for budget in range(33, 61):
        context = create("generate.context", {"max_context_length": budget, "min_block_tokens": 4})(
            _rows(text)).column("context")[0].as_py()
        assert context.endswith(" …"), budget  # cut: the text is longer than every budget here
        kept = context.removeprefix("[Document 1] t\n").removesuffix(" …")
        assert "\ufffd" not in context, (budget, context[-20:])
        assert text.startswith(kept), budget
        # and not inside a character as the reader sees it (a flag, a joined emoji, a syllable with its marks)
        assert len(kept) in ends, (budget, kept[-6:])
