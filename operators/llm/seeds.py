"""Which seed each model call of an LLM step samples with: the step's ``seed``, moved on for a chat's choices.

A chat that asks a flow for ``n`` choices runs its answer step once over ``n`` copies of the question, one query id
each (serve/chat/flow_choices.py); with the step's one ``seed`` every copy would sample the same reply. As a served
model does for ``n`` (serve/deployments/llm.py's ``choice_body``), choice ``i`` samples with ``seed + i``: the chat
runs the step inside ``seeding_choices({qid: i})``, on its thread, and ``call_seed`` adds the offset of the query a
call is for. Outside such a block (a flow run, a batch) every call of the step samples with its ``seed``.
"""

from __future__ import annotations

from typing import ContextManager, Mapping

from operators.thread_value import ThreadValue

_offsets: ThreadValue[Mapping[str, int]] = ThreadValue()
#: OpenAI's seeds are 64-bit signed integers: an offset past the top wraps round, as a 64-bit sum does.
_SPAN = 2**64


def seeding_choices(offsets: Mapping[str, int]) -> ContextManager[None]:
    """Within this block, on this thread, a call for query ``qid`` samples with the step's seed + ``offsets[qid]``."""
    return _offsets.holding(offsets)


def call_seed(seed: int | None, qid: str | None) -> int | None:
    """The seed of one call for query ``qid`` of a step whose ``seed`` param is ``seed`` (None: none, draw one)."""
    if seed is None:
        return None
    offset = (_offsets.get() or {}).get(str(qid), 0) if qid is not None else 0
    return moved_seed(seed, offset)


def moved_seed(seed: int, offset: int) -> int:
    """``seed + offset`` as a 64-bit signed sum: past the top it wraps round to the bottom."""
    return (seed + offset + _SPAN // 2) % _SPAN - _SPAN // 2
