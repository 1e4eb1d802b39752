"""Token-id inputs of OpenAI's ``/v1/embeddings``, read back as the texts they encode.

OpenAI's API takes a text as an array of token ids of OpenAI's tokenizer, and LangChain's ``OpenAIEmbeddings``
sends every text that way by default (``check_embedding_ctx_length``): it encodes with tiktoken's encoding for the
model's name and, for a name tiktoken does not know (every model served here), with ``cl100k_base``. A served model
reads text with its own tokenizer, so the ids are decoded with ``cl100k_base`` first, which gives back the client's
exact text. litellm, a dependency, ships that encoding's file, so nothing is downloaded (its folder becomes
tiktoken's cache unless ``TIKTOKEN_CACHE_DIR`` names another).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

#: The encoding LangChain falls back to for a model name tiktoken does not know, and OpenAI's embedding models use.
ENCODING = "cl100k_base"


def is_token_ids(value: Any) -> bool:
    """Whether an ``input`` is token ids: a list of integers (one text) or a list of such lists (several)."""
    def ids(item: Any) -> bool:
        return isinstance(item, list) and bool(item) and all(_is_id(i) for i in item)

    return isinstance(value, list) and bool(value) and (ids(value) or all(ids(item) for item in value))


def decode(value: list[Any]) -> str | list[str]:
    """The text (a list of ids) or texts (a list of lists) that ``value`` encodes; a ``ValueError`` naming the first
    id that is not one of the encoding's."""
    encoding = _encoding()
    if _is_id(value[0]):
        return _decode_one(encoding, value, "")
    return [_decode_one(encoding, ids, f" of text {n}") for n, ids in enumerate(value)]


def _is_id(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


def _decode_one(encoding: Any, ids: list[int], where: str) -> str:
    bad = next((i for i in ids if not 0 <= i < encoding.n_vocab), None)
    if bad is None:
        try:
            return encoding.decode(ids, errors="strict")
        except KeyError:  # an id inside the range that the encoding leaves unused (100256, 100261-100275)
            bad = next(i for i in ids if not _has_token(encoding, i))
        except UnicodeDecodeError:
            raise ValueError(f"the token ids{where} are not whole UTF-8 text in {ENCODING}: send the text instead") \
                from None
    raise ValueError(f"token id {bad}{where} is not one of {ENCODING}'s (0 to {encoding.n_vocab - 1}, less the ids it "
                     f"leaves unused): token ids are read as {ENCODING}'s, OpenAI's and LangChain's; send the text "
                     "instead")


def _has_token(encoding: Any, token: int) -> bool:
    try:
        encoding.decode_single_token_bytes(token)
    except KeyError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _encoding() -> Any:
    import tiktoken

    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    return tiktoken.get_encoding(ENCODING)
