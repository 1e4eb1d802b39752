"""Chunk windows counted in a model's word pieces (``preprocess.chunk`` with ``tokenizer``).

An encoder reads a fixed number of word pieces (MiniLM: 256, with its two special tokens) and drops the rest
without a word. Regex tokens are not word pieces: English runs about 1.3 pieces to a regex token, and a line
of Chinese or Japanese, with no spaces, is one regex token of hundreds of pieces. So a chunk sized in regex
tokens can be longer than its encoder reads, and its end is never embedded. Counting the model's own pieces
makes a chunk of ``size`` fit a model that reads ``size``.

Windows start and end at a word (a piece that follows a gap in the text, as the Rust tokenizer's offsets
show), so a chunk does not begin with half a word; only a word longer than a whole chunk is cut between its
pieces. Consecutive chunks then share about ``overlap`` pieces (whole words), not exactly.

A piece can stand for any number of characters: WordPiece makes a word of over 100 characters (a run of letters
without a space, a long URL's path) one ``[UNK]``. So a piece of more than ``LONG_UNIT_CHARS`` characters is counted
as parts of ``PART_CHARS`` characters, which a window may cut between, and no window spans a gap of more than
``LONG_GAP_CHARS`` (``_chunk_units``): a chunk of ``size`` has at most about ``size`` times those characters
(5 MB without a space was one chunk of 5 MB). Real text's pieces and gaps are far shorter: its chunks are the same.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from operators.preprocess._chunk_units import LONG_GAP_CHARS, LONG_UNIT_CHARS, PART_CHARS


class ChunkTokenizerError(ValueError):
    """The model named for counting has no tokenizer that can be read here."""


def tokenizer_file(reference: str) -> Path:
    """The ``tokenizer.json`` of ``reference`` (a model name or folder): the file that decides its pieces."""
    from operators.models import resolve_model_path

    folder = resolve_model_path(reference)
    candidates = [folder / "tokenizer.json"]
    modules = folder / "modules.json"
    if modules.is_file():  # a sentence-transformers folder: the Transformer module's folder
        candidates += [folder / str(m.get("path") or "") / "tokenizer.json" for m in json.loads(modules.read_text())]
    found = next((path for path in candidates if Path(path).is_file()), None)
    if found is None:
        raise ChunkTokenizerError(f"model '{reference}' has no tokenizer.json (a fast tokenizer) in {folder}: "
                                  "chunks cannot be counted in its pieces; leave out tokenizer to count regex tokens")
    return Path(found)


@functools.lru_cache(maxsize=4)
def model_tokenizer(reference: str):
    """The Rust tokenizer of ``reference`` (a model name or folder), without truncation or padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file(reference)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@functools.lru_cache(maxsize=4)
def continuation_prefix(reference: str) -> str | None:
    """The prefix of a piece that continues a word ("##") when ``reference``'s tokenizer is a WordPiece one, else
    None."""
    model = json.loads(model_tokenizer(reference).to_str()).get("model") or {}
    return model.get("continuing_subword_prefix") if model.get("type") == "WordPiece" else None


def piece_windows(texts: list[str], tokenizer, size: int, overlap: int, continuation: str | None = None):
    """(text index, chunk index, chunk text, piece ids) for every chunk of ``texts``; a text without pieces is one
    empty chunk, a text that fits is one chunk, stripped of the spaces at its ends. Every text is tokenized once,
    with offsets, and only the longer texts' offsets are read: with offsets a tokenizing costs what counting alone
    does, and counting every text first, then the longer ones again for their offsets, cost a third more. A text
    of at most ``size`` pieces and ``size * PART_CHARS`` characters fits whatever its pieces' lengths.

    With ``continuation`` (``continuation_prefix``), each chunk's piece ids come too, as the tokenizer gives them for
    the chunk's text (an encoder with the same tokenizer need not tokenize it again); None for a chunk that begins or
    ends inside a word (a word longer than a chunk, or a piece cut into parts), whose pieces its own text would not
    give. Else they are None."""
    text_of, index, chunks, ids = [], [], [], []
    for t, (text, encoding) in enumerate(zip(texts, tokenizer.encode_batch(texts, add_special_tokens=False))):
        wins = None
        if len(encoding) and (len(encoding) > size or len(text) > size * PART_CHARS):
            spans, origin = _cut_long(np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2))
            wins = _windows(spans, size, overlap, np.flatnonzero(spans[1:, 0] - spans[:-1, 1] > LONG_GAP_CHARS) + 1)
        if wins is None or (len(wins) == 1 and len(encoding) <= size):
            text_of.append(t), index.append(0), chunks.append(text.strip() if len(encoding) else "")
            ids.append(encoding.ids if continuation else None)
            continue
        pieces, tokens = (encoding.ids, encoding.tokens) if continuation else (None, None)
        for i, (first, stop) in enumerate(wins):
            text_of.append(t), index.append(i), chunks.append(text[spans[first, 0]: spans[stop - 1, 1]])
            whole = continuation and (first == 0 or origin[first - 1] != origin[first]) and (
                stop == len(origin) or origin[stop] != origin[stop - 1])  # not inside a piece cut into parts
            begin, end = int(origin[first]), int(origin[stop - 1]) + 1
            whole = whole and not tokens[begin].startswith(continuation) and (
                end == len(tokens) or not tokens[end].startswith(continuation))
            ids.append(pieces[begin:end] if whole else None)
    return text_of, index, chunks, ids


def _cut_long(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pieces' character spans with each one of more than ``LONG_UNIT_CHARS`` characters cut into parts of
    ``PART_CHARS``, and the piece each span is of."""
    lengths = spans[:, 1] - spans[:, 0]
    long = lengths > LONG_UNIT_CHARS
    if not long.any():
        return spans, np.arange(len(spans))
    parts = np.where(long, -(-lengths // PART_CHARS), 1)
    origin = np.repeat(np.arange(len(spans)), parts)
    begin = spans[origin, 0] + (np.arange(len(origin)) - np.repeat(np.cumsum(parts) - parts, parts)) * PART_CHARS
    end = np.where(long[origin], np.minimum(begin + PART_CHARS, spans[origin, 1]), spans[origin, 1])
    return np.stack([begin, end], axis=1), origin


def _windows(spans: np.ndarray, size: int, overlap: int, breaks: np.ndarray) -> list[tuple[int, int]]:
    """[first, stop) piece ranges of one text's windows: at most ``size`` pieces each, whole words where a word
    fits, about ``overlap`` pieces shared by neighbours; none reaches across a piece of ``breaks`` (sorted) to the
    one before it."""
    n = len(spans)
    starts_word = np.ones(n, bool)
    starts_word[1:] = spans[1:, 0] > spans[:-1, 1]  # a gap (a space, a dropped character) before the piece
    word_starts = np.flatnonzero(starts_word)
    windows, first = [], 0
    for end in [*breaks.tolist(), n]:  # each stretch between breaks, on its own
        while True:
            if end - first <= size:
                windows.append((first, end))
                break
            limit = first + size  # the piece after the longest window
            before = word_starts[np.searchsorted(word_starts, limit, side="right") - 1]  # last word start <= limit
            stop = int(before) if before > first else limit  # a word longer than a chunk is cut between pieces
            windows.append((first, stop))
            low = max(first + 1, stop - overlap)
            after = word_starts[np.searchsorted(word_starts, low)] if low <= word_starts[-1] else stop
            first = int(min(after, stop))
        first = end
    return windows
