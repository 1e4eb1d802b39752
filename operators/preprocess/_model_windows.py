"""Chunk windows counted in a model's word pieces (``preprocess.chunk`` with ``tokenizer``).

An encoder reads a fixed number of word pieces (MiniLM: 256, with its two special tokens) and drops the rest
without a word. Regex tokens are not word pieces: English runs about 1.3 pieces to a regex token, and a line
of Chinese or Japanese, with no spaces, is one regex token of hundreds of pieces. So a chunk sized in regex
tokens can be longer than its encoder reads, and its end is never embedded. Counting the model's own pieces
makes a chunk of ``size`` fit a model that reads ``size``.

Windows start and end at a word (a piece that follows a gap in the text, as the Rust tokenizer's offsets
show), so a chunk does not begin with half a word; only a word longer than a whole chunk is cut between its
pieces. Consecutive chunks then share about ``overlap`` pieces (whole words), not exactly. Chinese and Japanese
have no gap between words, so in a text with their sentence ends a window ends at one of those (``。！？``) or, where
none falls in its second half, at a clause's end (``_cjk_sentences.cut_points``).

A piece can stand for any number of characters: WordPiece makes a word of over 100 characters (a run of letters
without a space, a long URL's path) one ``[UNK]``. So a piece of more than ``LONG_UNIT_CHARS`` characters is counted
as parts of ``PART_CHARS`` characters, which a window may cut between, and no window spans a gap of more than
``LONG_GAP_CHARS`` (``_chunk_units``): a chunk of ``size`` has at most about ``size`` times those characters
(5 MB without a space was one chunk of 5 MB). Real text's pieces and gaps are far shorter: its chunks are the same.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from operators.preprocess import _cjk_sentences
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
        listed = json.loads(modules.read_text(encoding="utf-8"))
        candidates += [folder / str(m.get("path") or "") / "tokenizer.json" for m in listed]
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
    with offsets (``_encoded``), and only the longer texts' offsets are read: with offsets a tokenizing costs what
    counting alone does, and counting every text first, then the longer ones again for their offsets, cost a third
    more. A text of at most ``size`` pieces and ``size * PART_CHARS`` characters fits whatever its pieces' lengths.

    With ``continuation`` (``continuation_prefix``), each chunk's piece ids come too, as the tokenizer gives them for
    the chunk's text (an encoder with the same tokenizer need not tokenize it again); None for a chunk that begins or
    ends inside a word (a word longer than a chunk, or a piece cut into parts), whose pieces its own text would not
    give. Else they are None. A long text's are int32 arrays (views of its pieces': a list of Python ints took 40
    bytes a piece), a short one's a list."""
    text_of, index, chunks, ids = [], [], [], []
    continues = _ContinuationIds(tokenizer, continuation)
    for t, (text, encoding) in enumerate(zip(texts, _encoded(texts, tokenizer, continues))):
        wins, n = None, len(encoding)
        if n and (n > size or len(text) > size * PART_CHARS):
            encoding = encoding if isinstance(encoding, _Pieces) else _Pieces.of(encoding, 0, len(text), continues)
            spans, origin = _cut_long(encoding.offsets)
            wins = _windows(spans, size, overlap, np.flatnonzero(spans[1:, 0] - spans[:-1, 1] > LONG_GAP_CHARS) + 1,
                            _cjk_sentences.cut_points(text))
        if wins is None or (len(wins) == 1 and n <= size):
            text_of.append(t), index.append(0), chunks.append(text.strip() if n else "")
            ids.append(encoding.ids if continuation else None)
            continue
        for i, (first, stop) in enumerate(wins):
            text_of.append(t), index.append(i), chunks.append(text[spans[first, 0]: spans[stop - 1, 1]])
            whole = continuation and (origin is None or (first == 0 or origin[first - 1] != origin[first]) and (
                stop == len(origin) or origin[stop] != origin[stop - 1]))  # not inside a piece cut into parts
            begin, end = (first, stop) if origin is None else (int(origin[first]), int(origin[stop - 1]) + 1)
            whole = whole and not encoding.continues[begin] and (end == n or not encoding.continues[end])
            ids.append(encoding.ids[begin:end] if whole else None)
    return text_of, index, chunks, ids


def piece_id_lists(ids: list) -> pa.ListArray:
    """``piece_windows``'s piece ids as an Arrow column of int32 lists, null where None, gathered into one array
    first: ``pa.array`` of a list of numpy arrays held some 10 bytes a piece over its result while it converted (a
    long text's peak came there), and took twice as long over lists of Python ints."""
    lengths = np.fromiter((0 if one is None else len(one) for one in ids), np.int64, len(ids))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())  # over 2**31 pieces: an error
    held = [np.asarray(one, np.int32) for one in ids if one is not None]
    values = np.concatenate(held) if held else np.zeros(0, np.int32)
    nulls = pa.array([one is None for one in ids], pa.bool_())
    return pa.ListArray.from_arrays(offsets, pa.array(values), mask=nulls)


#: A text of more than ``SLICE_CHARS`` characters is tokenized in slices of about that many, and texts are given to
#: the tokenizer ``BATCH_CHARS`` characters at a time: the Rust tokenizer holds some 150 bytes a character while it
#: encodes and an ``Encoding`` some 400 bytes a piece, so one text of 8 MB tokenized whole took 1.2 GB. A long text
#: keeps only its pieces' ids, offsets and continuation flags (13 bytes a piece: offsets are int32 in a text of
#: under 2**31 characters).
SLICE_CHARS, BATCH_CHARS = 1 << 16, 1 << 19
#: Where a slice may end: at a single space between two non-spaces, the next slice beginning with that space. The
#: pieces are those of the whole text for a tokenizer that splits at spaces (BERT's WordPiece) and for those that
#: keep a space on the word after it (byte-level BPE, SentencePiece's Metaspace), even one that merges runs of
#: spaces. The first such space after ``SLICE_CHARS`` ends a slice, else the last one before (a text's end); a
#: stretch of twice ``SLICE_CHARS`` without one (one word longer than any chunk, to be cut between its pieces
#: anyway) is cut where the slice would end.
_SLICE_END = re.compile(r"(?<=\S) (?=\S)")


class _Pieces:
    """A long text's pieces as arrays, gathered from its slices' encodings, which are then let go."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, continues: np.ndarray | None):
        self.ids, self.offsets, self.continues = ids, offsets, continues

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, encoding, start: int, length: int, continues: _ContinuationIds) -> _Pieces:
        """The pieces of ``encoding``, a slice of a text of ``length`` characters from ``start``."""
        ids = np.asarray(encoding.ids, dtype=np.int32)
        offsets = np.asarray(encoding.offsets, dtype=_index_type(length)).reshape(-1, 2)
        offsets += start
        return cls(ids, offsets, continues(ids))

    @classmethod
    def join(cls, parts: list[_Pieces]) -> _Pieces:
        """One text's pieces from its slices', an array at a time, each part's let go once copied: the text's
        pieces are held twice over only one array's worth (joined whole, they were all held twice)."""
        fields = []
        for name in ("ids", "offsets", "continues"):
            held = [getattr(part, name) for part in parts]
            for part in parts:
                setattr(part, name, None)
            fields.append(None if held[0] is None else np.concatenate(held))
            del held
        return cls(*fields)


def _index_type(length: int):
    """The integer type that holds a position (or a count) up to ``length``."""
    return np.int32 if length < 2**31 else np.int64


class _ContinuationIds:
    """Which piece ids continue a word (their token begins with ``prefix``), by a table over the vocabulary built
    when first asked: a long text's token strings, a Python string a piece, are not kept."""

    def __init__(self, tokenizer, prefix: str | None):
        self.tokenizer, self.prefix, self.table = tokenizer, prefix, None

    def __call__(self, ids: np.ndarray) -> np.ndarray | None:
        if self.prefix is None:
            return None
        if self.table is None:
            vocab = self.tokenizer.get_vocab(with_added_tokens=True)
            self.table = np.zeros(max(vocab.values(), default=0) + 1, bool)
            self.table[[i for token, i in vocab.items() if token.startswith(self.prefix)]] = True
        return self.table[ids]


def _slices(text: str) -> list[tuple[int, int]]:
    """[start, stop) of the slices ``text`` is tokenized in (``_SLICE_END``): one for a text of up to
    ``SLICE_CHARS``."""
    starts = [0]
    while len(text) - starts[-1] > SLICE_CHARS:
        starts.append(_slice_end(text, starts[-1]))
    return list(zip(starts, [*starts[1:], len(text)]))


def _slice_end(text: str, start: int) -> int:
    edge = start + SLICE_CHARS
    found = _SLICE_END.search(text, edge, edge + SLICE_CHARS)
    if found:
        return found.start()
    space = text.rfind(" ", start + 1, edge)
    while space > start and (text[space - 1].isspace() or text[space + 1].isspace()):
        space = text.rfind(" ", start + 1, space)
    return space if space > start else edge


def _encoded(texts: list[str], tokenizer, continues: _ContinuationIds):
    """Each text's encoding, in order: an ``Encoding`` for a text of one slice, ``_Pieces`` for a longer one. At
    most ``BATCH_CHARS`` characters (or one slice) are in the tokenizer at once."""
    batch, size, parts = [], 0, []

    def flush():
        encodings = tokenizer.encode_batch([texts[t][a:b] for t, a, b, _ in batch], add_special_tokens=False)
        for (t, a, b, last), encoding in zip(batch, encodings):
            if a == 0 and last:
                yield encoding
                continue
            parts.append(_Pieces.of(encoding, a, len(texts[t]), continues))
            if last:
                yield _Pieces.join(parts)
                parts.clear()
        batch.clear()

    for t, text in enumerate(texts):
        cuts = _slices(text)
        for i, (a, b) in enumerate(cuts):
            if batch and size + b - a > BATCH_CHARS:
                yield from flush()
                size = 0
            batch.append((t, a, b, i == len(cuts) - 1))
            size += b - a
    if batch:
        yield from flush()


def _cut_long(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The pieces' character spans with each one of more than ``LONG_UNIT_CHARS`` characters cut into parts of
    ``PART_CHARS``, and the piece each span is of (None where no piece is cut: each span is its own piece). Only
    the long pieces' parts are computed apart: arrays of the whole text's length each took 8 bytes a piece."""
    long_at = np.flatnonzero(spans[:, 1] - spans[:, 0] > LONG_UNIT_CHARS)
    if not len(long_at):
        return spans, None
    counts = -(-(spans[long_at, 1] - spans[long_at, 0]) // PART_CHARS)  # the parts of each long piece
    parts = np.ones(len(spans), _index_type(len(spans) + int(counts.sum())))
    parts[long_at] = counts
    origin = np.repeat(np.arange(len(spans), dtype=parts.dtype), parts)
    del parts
    cut = spans[origin]
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # a part's place in its piece
    rows = np.repeat(long_at + np.cumsum(counts - 1) - (counts - 1), counts) + within
    cut[rows, 0] = np.repeat(spans[long_at, 0], counts) + within * PART_CHARS
    cut[rows, 1] = np.minimum(cut[rows, 0] + PART_CHARS, np.repeat(spans[long_at, 1], counts))
    return cut, origin


def _windows(spans: np.ndarray, size: int, overlap: int, breaks: np.ndarray,
             points: tuple[np.ndarray, np.ndarray] | None = None) -> list[tuple[int, int]]:
    """[first, stop) piece ranges of one text's windows: at most ``size`` pieces each, whole words where a word
    fits, about ``overlap`` pieces shared by neighbours; none reaches across a piece of ``breaks`` (sorted) to the
    one before it. ``points`` (``_cjk_sentences.cut_points``, Chinese or Japanese text): a window ends at a sentence
    end (or a gap) where one falls in its second half, else at a clause's end, and starts at either."""
    n = len(spans)
    starts_word = np.ones(n, bool)
    starts_word[1:] = spans[1:, 0] > spans[:-1, 1]  # a gap (a space, a dropped character) before the piece
    preferred = None
    if points is not None:
        sentence_at = np.isin(spans[:, 0], points[0])
        preferred = np.flatnonzero(starts_word | sentence_at)
        starts_word |= sentence_at | np.isin(spans[:, 0], points[1])
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
            if preferred is not None:
                sentence = int(preferred[np.searchsorted(preferred, limit, side="right") - 1])
                stop = sentence if sentence > first + size // 2 else stop
            windows.append((first, stop))
            low = max(first + 1, stop - overlap)
            after = word_starts[np.searchsorted(word_starts, low)] if low <= word_starts[-1] else stop
            first = int(min(after, stop))
        first = end
    return windows
