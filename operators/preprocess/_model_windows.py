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
from typing import Any
from pathlib import Path

import numpy as np
import pyarrow as pa

from operators.preprocess import _cjk_sentences
from operators.preprocess._chunk_units import LONG_GAP_CHARS, PART_CHARS
from operators.preprocess._piece_spans import cut_long, index_type, windows


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


def piece_windows(texts: list[str], tokenizer, size: int, overlap: int, continuation: str | None = None,
                  column: bool = False):
    """(text index, chunk index, chunk text, piece ids) for every chunk of ``texts``; a text without pieces is one
    empty chunk, a text that fits is one chunk, stripped of the spaces at its ends. Every text is tokenized once,
    with offsets (``_encoded_parts``), and only the longer texts' offsets are read: with offsets a tokenizing costs
    what counting alone does, and counting every text first, then the longer ones again for their offsets, cost a
    third more. A text of at most ``size`` pieces and ``size * PART_CHARS`` characters fits whatever its pieces'
    lengths. A long text is cut as its slices come (``_TextWindows``), so what it holds does not grow with it.

    With ``continuation`` (``continuation_prefix``), each chunk's piece ids come too, as the tokenizer gives them for
    the chunk's text (an encoder with the same tokenizer need not tokenize it again); None for a chunk that begins or
    ends inside a word (a word longer than a chunk, or a piece cut into parts), whose pieces its own text would not
    give. Else they are None. A long text's are int32 arrays (a list of Python ints took 40 bytes a piece), a short
    one's a list. With ``column``, the chunks come as an Arrow column (``_ChunkTexts``), else as a list."""
    text_of, index, ids = [], [], []
    chunks = _ChunkTexts() if column else []
    continues, cutting = _ContinuationIds(tokenizer, continuation), None
    for t, encoding, last in _encoded_parts(texts, tokenizer, continues):
        text = texts[t]
        if cutting is None and not isinstance(encoding, _Pieces):  # a text of one slice
            n = len(encoding)
            if not n or (n <= size and len(text) <= size * PART_CHARS):
                text_of.append(t), index.append(0), chunks.append(text.strip() if n else "")
                ids.append(encoding.ids if continuation else None)
                continue
            encoding = _Pieces.of(encoding, 0, len(text), continues)
        if cutting is None:
            cutting = _TextWindows(text, size, overlap, bool(continuation), chunks.arrow if column else list)
        cutting.add(encoding)
        if last:
            made = 0
            for part, piece_ids in cutting.finish():
                text_of += [t] * len(piece_ids)
                index += range(made, made + len(piece_ids))
                chunks.extend(part), ids.extend(piece_ids)
                made += len(piece_ids)
            cutting = None
    return text_of, index, chunks.done() if column else chunks, ids


class _ChunkTexts:
    """Chunk texts gathered into Arrow as they come, ``BATCH_ROWS`` at a time, a long text's a cut at a time
    (``arrow``): a 50 MB text's chunks were all held as Python strings, then in Arrow too."""

    def __init__(self):
        self.arrays, self.pending = [], []

    @staticmethod
    def arrow(texts: list[str]) -> pa.Array:
        return pa.array(texts, pa.string())

    def append(self, text: str) -> None:
        self.pending.append(text)
        if len(self.pending) >= BATCH_ROWS:
            self._flush()

    def extend(self, texts: pa.Array) -> None:
        self._flush()
        self.arrays.append(texts)

    def done(self) -> pa.ChunkedArray:
        self._flush()
        return pa.chunked_array(self.arrays, pa.string())

    def _flush(self) -> None:
        if self.pending:
            self.arrays.append(self.arrow(self.pending))
            self.pending = []


def piece_id_lists(ids: list) -> pa.ChunkedArray:
    """``piece_windows``'s piece ids as an Arrow column of int32 lists, null where None, ``BATCH_ROWS`` chunks at a
    time, each batch gathered into one array first (``pa.array`` of a list of numpy arrays held some 10 bytes a piece
    over its result while it converted, and took twice as long over lists of Python ints). ``ids`` is emptied as it
    is read, so that each batch's arrays are let go once copied: a long text's were all held twice."""
    batches = []
    while ids:
        batch = ids[:BATCH_ROWS]
        del ids[:BATCH_ROWS]
        lengths = np.fromiter((0 if one is None else len(one) for one in batch), np.int64, len(batch))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())  # over 2**31 pieces: an error
        held = [np.asarray(one, np.int32) for one in batch if one is not None]
        values = np.concatenate(held) if held else np.zeros(0, np.int32)
        nulls = pa.array([one is None for one in batch], pa.bool_())
        del held, batch
        batches.append(pa.ListArray.from_arrays(offsets, pa.array(values), mask=nulls))
    return pa.chunked_array(batches, pa.list_(pa.int32()))


#: Chunks converted to Arrow at a time (``piece_id_lists``, ``_ChunkTexts``).
BATCH_ROWS = 8192


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
        offsets = np.asarray(encoding.offsets, dtype=index_type(length)).reshape(-1, 2)
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


def _encoded_parts(texts: list[str], tokenizer, continues: _ContinuationIds):
    """(text index, encoding, last) for each text in order: its ``Encoding`` for a text of one slice, else each of
    its slices' ``_Pieces`` as they are tokenized. At most ``BATCH_CHARS`` characters (or one slice) are in the
    tokenizer at once."""
    batch, size = [], 0

    def flush():
        encodings = tokenizer.encode_batch([texts[t][a:b] for t, a, b, _ in batch], add_special_tokens=False)
        for (t, a, b, last), encoding in zip(batch, encodings):
            whole = a == 0 and last
            yield t, encoding if whole else _Pieces.of(encoding, a, len(texts[t]), continues), last
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


def _encoded(texts: list[str], tokenizer, continues: _ContinuationIds):
    """Each text's encoding, in order: an ``Encoding`` for a text of one slice, its slices' ``_Pieces`` joined for a
    longer one."""
    parts = []
    for _, encoding, last in _encoded_parts(texts, tokenizer, continues):
        if not isinstance(encoding, _Pieces):
            yield encoding
            continue
        parts.append(encoding)
        if last:
            yield _Pieces.join(parts)
            parts.clear()


#: A long text is cut into windows as its slices come, once this many of its pieces wait: it holds these and its
#: chunks, not all its pieces at once (13 bytes a piece, and its windows' arrays 12 more: a 50 MB text held 400 MB).
HELD_PIECES = 1 << 16


class _TextWindows:
    """One long text's chunks and their piece ids, cut as its pieces come (``add``): each time ``HELD_PIECES`` wait,
    the windows that the pieces still to come cannot change are made, and only the pieces from the next window's
    first on are kept. The windows are those of the text's pieces all at once (``windows`` reads a window's
    ``size`` pieces and the gaps between them, ``cut_long`` each piece alone); a text of at most ``size *
    PART_CHARS`` characters (one chunk if it has at most ``size`` pieces) is cut at its end."""

    def __init__(self, text: str, size: int, overlap: int, with_ids: bool, convert):
        self.text, self.size, self.overlap, self.with_ids = text, size, overlap, with_ids
        self.points = _cjk_sentences.cut_points(text)
        self.hold = HELD_PIECES if len(text) > size * PART_CHARS else float("inf")
        self.held: list[_Pieces] = []  # the pieces from the next window's on, in parts
        self.waiting = self.seen = self.first = 0  # pieces held and seen; the next window's first span in held
        self.convert, self.parts, self.made = convert, [], 0  # each cut's chunk texts (``convert``ed) and piece ids

    def add(self, part: _Pieces) -> None:
        self.held.append(part)
        self.waiting, self.seen = self.waiting + len(part), self.seen + len(part)
        if self.waiting >= self.hold:
            self._cut(final=False)

    def finish(self) -> list[tuple[Any, list[np.ndarray | None]]]:
        """(chunk texts, their piece ids) of each cut, in order."""
        pieces = self._cut(final=True)
        if not self.seen or (self.made == 1 and self.seen <= self.size):  # no piece, or it fits whole
            return [(self.convert([self.text.strip() if self.seen else ""]), [pieces.ids if self.with_ids else None])]
        return self.parts

    def _cut(self, final: bool) -> _Pieces:
        pieces = _Pieces.join(self.held) if len(self.held) > 1 else self.held[0]
        self.held, n = [], len(pieces)
        if not n:
            return pieces
        spans, origin = cut_long(pieces.offsets)
        points = None if self.points is None else tuple(  # those among these pieces' starts
            at[np.searchsorted(at, spans[0, 0]): np.searchsorted(at, spans[-1, 0], side="right")] for at in self.points)
        wins, first = windows(spans, self.size, self.overlap,
                               np.flatnonzero(spans[1:, 0] - spans[:-1, 1] > LONG_GAP_CHARS) + 1, points, self.first,
                               final)
        ids = pieces.ids.copy() if self.with_ids and wins else None  # the chunks' are views of it; the rest goes
        texts, made = [], []
        for a, stop in wins:
            whole = self.with_ids and (origin is None or (a == 0 or origin[a - 1] != origin[a]) and (
                stop == len(origin) or origin[stop] != origin[stop - 1]))  # not inside a piece cut into parts
            begin, end = (a, stop) if origin is None else (int(origin[a]), int(origin[stop - 1]) + 1)
            whole = whole and not pieces.continues[begin] and (end == n or not pieces.continues[end])
            texts.append(self.text[spans[a, 0]: spans[stop - 1, 1]])
            made.append(ids[begin:end] if whole else None)
        if wins:
            self.parts.append((self.convert(texts), made))
            self.made += len(wins)
        if not final:  # keep the pieces from the next window's first on (a piece cut into parts: all of it)
            keep = first if origin is None else int(origin[first])
            self.first = 0 if origin is None else first - int(np.searchsorted(origin, keep))
            self.held = [_Pieces(*(None if a is None else a[keep:].copy() for a in
                                   (pieces.ids, pieces.offsets, pieces.continues)))]
            self.waiting = n - keep
        return pieces
