"""A summary that ``max_tokens`` cut mid-sentence: kept, trimmed to its last whole sentence (Punkt) when it has one."""

from __future__ import annotations

import re

from operators.llm.gateway import Completion

#: How a whole sentence ends: its stop (a Chinese or Japanese one too), then any closing quotes or brackets.
_END = re.compile(r"[.!?…。！？][\"'”’)\]」』）]*$")
#: A list item's number, which ends with a stop but no sentence ("1.", "Summary: 2.", "a)").
_LIST_NUMBER = re.compile(r"(?:^|\s)(?:\d{1,3}[.)]|[a-z]\))$")


def finished(reply: Completion) -> tuple[str, str | None]:
    """The summary to keep from ``reply`` and what was done to it (None: the reply ended on its own, so it is kept
    as written). A reply the model stopped at ``max_tokens`` (finish reason ``length``) ends mid-sentence: it is
    trimmed to its last whole sentence, or kept as written when it has none (a cut summary beats no summary)."""
    text = reply.text.strip()
    if reply.finish_reason != "length" or _whole(text):
        return text, None
    from operators.preprocess._chunk_units import punkt_tokenizer, sentence_spans

    ends = [end for _, end in sentence_spans(text, punkt_tokenizer("english")) if _whole(text[:end])]
    if not ends:
        return text, "cut at max_tokens, no whole sentence: kept as written"
    return text[:ends[-1]], f"cut at max_tokens: trimmed to its last whole sentence ({len(text) - ends[-1]} " \
                            "characters dropped)"


def _whole(text: str) -> bool:
    """Whether ``text`` ends a whole sentence: with its stop, not with a list item's number."""
    return bool(_END.search(text)) and not _LIST_NUMBER.search(text)
