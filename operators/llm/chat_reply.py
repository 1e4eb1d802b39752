"""An OpenAI chat answer read from what a server sends: the whole ``chat.completion``, or its stream's events.

Both Tessera's language-model deployments (llama.cpp, ``ray.serve.llm``'s vLLM) answer a chat as an
async generator of one or the other (``serve/deployments/llm.py``); a flow step placed on one
(``flows.placement``) and Cohere's chat over one (``serve/chat/cohere_chat.py``) read them the same way.
"""

from __future__ import annotations

import json
from typing import Any, Callable


class StreamError(RuntimeError):
    """The stream carried an error event in place of its next chunk."""


class ChatReply:
    """The text, finish reason and token usage of one answer, read item by item (``read``)."""

    def __init__(self) -> None:
        self.text, self.finish_reason, self.prompt_tokens, self.completion_tokens = "", None, 0, 0

    def read(self, item: Any, on_text: Callable[[str], None] | None = None) -> None:
        """Add one item: a ``chat.completion`` (a dict or a pydantic model), or an SSE event (``data: {chunk}``,
        ``data: [DONE]``); ``on_text`` gets each streamed piece. An error event raises ``StreamError``."""
        if hasattr(item, "model_dump"):
            item = item.model_dump()
        if isinstance(item, str):
            data = item.strip().removeprefix("data:").strip()
            if not data or data == "[DONE]":
                return
            item = json.loads(data)
            if "error" in item:
                raise StreamError((item["error"] or {}).get("message") or "the stream failed")
        for choice in item.get("choices") or []:
            piece = (choice.get("delta") or choice.get("message") or {}).get("content") or ""
            self.text += piece
            if piece and on_text is not None and "delta" in choice:
                on_text(piece)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        usage = item.get("usage") or {}
        self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
        self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
