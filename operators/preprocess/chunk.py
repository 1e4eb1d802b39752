"""Chunker: documents to overlapping passages."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from operators.base import Operator
from operators.ids import fill_missing_ids
from operators.preprocess import _chunk_units as units
from operators.preprocess._model_windows import (ChunkTokenizerError, continuation_prefix,
                                                  model_tokenizer, piece_id_lists, piece_windows, tokenizer_file)
from operators.tables import set_column

PUNKT_LANGUAGES = Literal[
    "czech", "danish", "dutch", "english", "english_web", "estonian", "finnish", "french", "german", "greek",
    "italian", "malayalam", "norwegian", "polish", "portuguese", "russian", "slovene", "spanish", "swedish", "turkish",
]


class Chunker(Operator):
    """Split each document's text into overlapping chunks of tokens, words or sentences.

    Windows of ``size`` units advance by ``size - overlap``, so consecutive chunks of
    a document share exactly ``overlap`` units and together cover the whole text; a
    chunk is the original text from its first unit to its last (spacing kept).
    Tokens are regex tokens: runs of word characters (combining marks count as word
    characters: "Гражда́нская" is one), or one punctuation/symbol character
    (``_chunk_units.char_class``), and each Chinese or Japanese character a token of its own, as for words (a line
    of them was one token, so a chunk of 256 tokens held 256 clauses); with ``tokenizer`` they are that model's word
    pieces, so a chunk fits an encoder that reads ``size`` of them (``_model_windows``: whole
    words, about ``overlap`` shared). Words are runs of non-whitespace, each Chinese or Japanese character a word of
    its own (with the punctuation after it; Korean is spaced): their text has no spaces, so a paragraph was one
    word; sentences come
    from Punkt (models ship with the ``punkt`` package), Chinese and Japanese ones cut at their
    ``。！？`` too (``_cjk_sentences``), whatever ``language``.
    Emits one row per chunk: ``chunk_id`` (``<doc_id>#<chunk_index>``), ``doc_id``
    (the input ``docno``, or a content id when there is none), ``chunk_index`` and
    ``total_chunks``, the chunk in ``text``, and ``docno = chunk_id``; other columns
    are repeated. A text with no units stays as one empty chunk.
    A chunk's length in characters is bounded by ``size`` whatever the text: a unit of
    over ``LONG_UNIT_CHARS`` characters (a run without spaces, a ``[UNK]`` piece) counts
    as one per ``PART_CHARS`` of them, a sentence over ``LONG_SENTENCE_CHARS`` is cut into
    parts, and no chunk spans over ``LONG_GAP_CHARS`` of spaces (``_chunk_units``).

    Usage::

        Chunker({"unit": "words", "size": 3, "overlap": 1})(pa.table({"docno": ["d1"], "text": ["a b c d e"]}))
        # chunk_id: ["d1#0", "d1#1"], text: ["a b c", "c d e"], chunk_index: [0, 1], total_chunks: [2, 2]
    """

    name = "preprocess.chunk"
    version = "4"  # 2: Chinese and Japanese text cut at 。！？ (one sentence before; a piece chunk ended mid-word)
    # 3: unit words counts a Chinese or Japanese character as a word (a paragraph was one word)
    # 4: and unit tokens as a token (a run between punctuation was one), a kanji's variation selector kept with it
    scope = "row"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        unit: Literal["tokens", "sentences", "words"] = Field("tokens", description="What `size` and `overlap` count.")
        size: int = Field(256, gt=0, description="Units in a chunk (the last chunk of a document may have fewer).")
        overlap: int = Field(32, ge=0, validate_default=True,  # the default too: size 20 left it above the size
                             description="Units shared by consecutive chunks; less than `size`.")
        language: PUNKT_LANGUAGES = Field("english", description="Punkt model for `unit: sentences`.")
        tokenizer: str | None = Field(
            None, min_length=1, description="Count `unit: tokens` as this model's word pieces (a model name or "
            "folder, e.g. the encoder's), so that a chunk of `size` fits a model that reads `size` pieces.")
        pieces_column: str | None = Field(
            None, min_length=1, description="With a WordPiece `tokenizer`, also write each chunk's piece ids "
            "(int32 lists) into this column, so an encoder with that tokenizer need not tokenize the chunk again; "
            "null for a chunk cut inside a word, and for every chunk of another kind of tokenizer.")
        text_column: str = Field("text", min_length=1, description="Column holding the text; receives the chunk.")
        id_column: str = Field("docno", min_length=1, description="Column holding the document id (becomes doc_id).")

        @field_validator("overlap")
        @classmethod
        def _overlap_below_size(cls, overlap: int, info: ValidationInfo) -> int:
            size = info.data.get("size")
            if size is not None and overlap >= size:
                raise ValueError(f"overlap ({overlap}) must be less than size ({size}), or chunks would not "
                                 f"advance: set overlap below {size} (the default is 32)")
            return overlap

        @field_validator("tokenizer")
        @classmethod
        def _tokenizer_counts_tokens(cls, tokenizer: str | None, info: ValidationInfo) -> str | None:
            if tokenizer is not None and info.data.get("unit") != "tokens":
                raise ValueError(f"tokenizer counts tokens; unit is '{info.data.get('unit')}': set unit: tokens "
                                 "or leave out tokenizer")
            return tokenizer

        @field_validator("pieces_column")
        @classmethod
        def _pieces_need_a_tokenizer(cls, column: str | None, info: ValidationInfo) -> str | None:
            if column is not None and not info.data.get("tokenizer"):
                raise ValueError("pieces_column holds the tokenizer's piece ids: set tokenizer too")
            return column

    def reads(self) -> None:
        return None  # every column is repeated into the chunks

    def requires(self) -> list[str]:
        return [self.params.text_column]

    def produces(self) -> dict[str, str]:
        pieces = {self.params.pieces_column: "data"} if self.params.pieces_column else {}
        return {
            "chunk_id": "id", "doc_id": "id", "chunk_index": "data", "total_chunks": "data",
            self.params.text_column: "text", "docno": "id", **pieces,
        }

    def required_models(self) -> dict[str, str]:
        return {"params.tokenizer": self.params.tokenizer} if self.params.tokenizer else {}

    def cache_identity(self) -> dict[str, Any]:
        """The params and, with a ``tokenizer``, its ``tokenizer.json``'s content: a model folder trained again with
        another vocabulary under the same name cuts other chunks, where the old ones were replayed."""
        identity = super().cache_identity()
        if self.params.tokenizer:
            from operators.models.fingerprint import file_digest
            from operators.models.references import ModelNotFoundError

            try:
                identity["tokenizer_file"] = file_digest(tokenizer_file(self.params.tokenizer))
            except (ModelNotFoundError, ChunkTokenizerError, OSError):
                pass  # nothing to read: setup says why
        return identity

    def setup(self) -> None:
        if self.params.unit == "sentences":
            units.punkt_tokenizer(self.params.language)
        if self.params.tokenizer:
            model_tokenizer(self.params.tokenizer)

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        column = table.column(p.text_column)
        if pa.types.is_null(column.type) or pa.types.is_string_view(column.type):  # every text null; a view
            column = column.cast(pa.string())  # (Arrow fills neither with "")
        whole = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()  # (which copies even one)
        texts = pc.fill_null(whole if column.num_chunks else pa.array([], pa.string()), "")
        pieces = None
        if p.unit == "sentences":
            text_of, index, totals, chunks = self._sentence_chunks(texts)
        elif p.tokenizer:
            text_of, index, totals, chunks, pieces = self._piece_chunks(texts)
        else:
            text_of, index, totals, chunks = self._span_chunks(texts)
        titles = table.column("title") if "title" in table.column_names else None
        ids = table.column(p.id_column) if p.id_column in table.column_names else None
        doc_ids = fill_missing_ids(ids, titles, texts).take(pa.array(text_of, pa.int64()))
        index_arr = pa.array(index, pa.int32())
        chunk_ids = pc.binary_join_element_wise(doc_ids, index_arr.cast(pa.string()), "#")
        rest = table.drop_columns([p.text_column])  # do not copy the long texts only to replace them
        if rest.num_columns:
            out = rest.take(pa.array(text_of, pa.int64()))
            out = out.add_column(table.column_names.index(p.text_column), p.text_column, chunks)
        else:
            out = pa.table({p.text_column: chunks})
        for name, values in (
            ("docno", chunk_ids), ("chunk_id", chunk_ids), ("doc_id", doc_ids),
            ("chunk_index", index_arr), ("total_chunks", pa.array(totals, pa.int32())),
        ):
            out = set_column(out, name, values)
        if p.pieces_column:
            out = set_column(out, p.pieces_column, piece_id_lists(pieces))
        return out

    def _span_chunks(self, texts: pa.Array):
        """Token/word chunks, a block of texts at a time, sliced from the UTF-8 bytes."""
        p = self.params
        data, offsets = units.string_buffers(texts)
        # blocks of about BLOCK_BYTES bytes (one text at least) bound the memory numpy needs
        cuts = np.searchsorted(offsets, np.arange(units.BLOCK_BYTES, offsets[-1], units.BLOCK_BYTES))
        bounds = np.unique(np.r_[0, cuts, len(texts)])
        parts, pieces = [], []
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            block = data[offsets[lo]: offsets[hi]]
            starts, ends, counts = units.cut_long(block, *units.unit_bytes(block, offsets[lo: hi + 1] - offsets[lo],
                                                                           p.unit))
            breaks = units.long_gaps(block, starts, ends, counts)
            text_of, index, first, stop = units.windows(counts, p.size, p.overlap, breaks)
            base = (np.cumsum(counts) - counts)[text_of]
            has = stop > first  # False only for a text without units: its one chunk is empty
            begin = np.zeros(len(text_of), np.int64)
            end = np.zeros(len(text_of), np.int64)
            begin[has] = starts[(base + first)[has]]
            end[has] = ends[(base + stop - 1)[has]]
            buf = block.tobytes()
            pieces.extend(buf[b:e] for b, e in zip(begin.tolist(), end.tolist()))
            parts.append((text_of + lo, index, np.bincount(text_of, minlength=hi - lo)[text_of]))
        return self._gather(parts, pa.array(pieces, pa.binary()).cast(pa.string()))

    def _sentence_chunks(self, texts: pa.Array):
        """Sentence chunks: Punkt spans per text, then the same windows as tokens."""
        p = self.params
        tokenizer = units.punkt_tokenizer(p.language)
        values = texts.to_pylist()
        spans = [units.chunk_sentence_spans(text, tokenizer) for text in values]
        counts = np.array([len(s) for s in spans], np.int64)
        text_of, index, first, stop = units.windows(counts, p.size, p.overlap, units.sentence_breaks(spans))
        pieces = [
            values[t][spans[t][f][0]: spans[t][s - 1][1]] if s > f else ""
            for t, f, s in zip(text_of.tolist(), first.tolist(), stop.tolist())
        ]
        totals = np.bincount(text_of, minlength=len(values))[text_of]
        return self._gather([(text_of, index, totals)], pa.array(pieces, pa.string()))

    def _piece_chunks(self, texts: pa.Array):
        """Chunks counted in the model's word pieces (``_model_windows``), and their piece ids when asked."""
        p = self.params
        tokenizer = model_tokenizer(p.tokenizer)
        continuation = continuation_prefix(p.tokenizer) if p.pieces_column else None
        text_of, index, chunks, pieces = piece_windows(texts.to_pylist(), tokenizer, p.size, p.overlap, continuation,
                                                       column=True)
        text_of = np.asarray(text_of, np.int64)
        totals = np.bincount(text_of, minlength=len(texts))[text_of]
        gathered = self._gather([(text_of, np.asarray(index, np.int64), totals)], chunks)
        return (*gathered, pieces)

    @staticmethod
    def _gather(parts, chunks: pa.Array):
        if not parts:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, pa.array([], pa.string())
        text_of, index, totals = (np.concatenate(column) for column in zip(*parts))
        return text_of, index, totals, chunks
