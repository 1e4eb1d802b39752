"""The checks of OpenAI's chat fields that Cohere's ``POST /v2/chat`` body makes too (serve/chat/cohere_chat.py): the
stream's options, stop sequences, log probabilities and a text answer. A module of their own so that the two request
models share them without a chat module reading the other's body; serve/chat/chat.py imports them, so
``serve.chat.chat``'s names hold.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serve.schemas import check_texts


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = Field(False, strict=True)


def check_stop(value: str | list[str] | None) -> str | list[str] | None:
    """Refuse an empty stop sequence, which llama.cpp finds before the first word (the answer was empty, a 200), as
    vLLM refuses it; and one that is not valid Unicode (a lone surrogate failed the model's call: a 500)."""
    sequences = [value] if isinstance(value, str) else value or []
    for i, sequence in enumerate(sequences):
        if not sequence:
            raise ValueError(f"stop sequence {i} is empty: it would end the answer before its first word")
    check_texts(sequences, "stop sequence")
    return value


def no_logprobs(value: Any, field: str) -> Any:
    """Refused, not ignored: the client would read the answer's log probabilities as null (the llama.cpp models are
    loaded without every token's logits)."""
    if value:
        raise ValueError(f"{field} is not supported: these models return no log probabilities")
    return value


def text_answers_only(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Refused unless text: JSON asked for and prose answered, the client's parse would fail."""
    if value and value != {"type": "text"}:
        raise ValueError("only {'type': 'text'} is supported: the answer is text")
    return value
