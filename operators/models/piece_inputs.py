"""An encoder's inputs from the word-piece ids a chunker already made, so that an ingestion tokenizes a chunk once.

``preprocess.chunk`` with a ``tokenizer`` tokenizes every document to cut it into chunks that fit the encoder, and
with ``pieces_column`` it keeps each chunk's piece ids. The embed step reads ``title + ". " + chunk`` and tokenized
that again: on the H200's 916K ingestion the chunking and the embed actors' tokenizing took about as much CPU as
each other, and the CPU bounded the run (docs/results.md, "On a GPU").

For a BERT-style tokenizer (``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece``, a ``[CLS] $A [SEP]`` template)
the pieces of the joined text are the title's, then ``.``'s, then the chunk's: the normalizer works a character at a
time and the pre-tokenizer splits at spaces and punctuation, so no piece spans a join. ``PieceComposer.of`` takes
only such a tokenizer, and only when composing gives the tokenizer's own ids on ``PROBES``; anything else is
tokenized from its text, as before.
"""

from __future__ import annotations

import json

import numpy as np

#: (title, chunk) pairs composed and tokenized whole before composing is trusted: accents, capitals, CJK (which
#: BERT splits a character at a time), punctuation at the joins, an empty title, a title past the model's length.
PROBES = (
    ("Honey bees", "Honey bees communicate by dancing."),
    ("", "no title, only the text"),
    ("Ünïcödé café — déjà vu", "naïve CAPITALS and digits 12,345.67!"),
    ("東京 Tokyo", "日本語のテキスト and some text."),
    ("Title.", "(a chunk that starts with punctuation)"),
    (" ", "a title of one space"),
    ("a long title " * 100, "after a title longer than the model reads"),
)
KINDS = ("BertNormalizer", "BertPreTokenizer", "WordPiece")
TEMPLATES = ("TemplateProcessing", "BertProcessing")


class PieceComposer:
    """Composes ``[CLS] title . chunk [SEP]`` from the pieces of the title and of the chunk, truncated as the
    tokenizer truncates a single text (its end cut, the markers kept)."""

    def __init__(self, tokenizer, max_length: int, first: list[int], last: list[int], dot: list[int]):
        self.tokenizer = tokenizer  # without truncation or padding: for titles
        self.room = max_length - len(first) - len(last)
        self.first, self.last, self.dot = first, last, dot

    @classmethod
    def of(cls, tokenizer, max_length: int) -> "PieceComposer | None":
        """For ``tokenizer`` (a ``tokenizers.Tokenizer``, padding on the right) when composing gives its own ids
        on ``PROBES``; else None."""
        from tokenizers import Tokenizer

        text = tokenizer.to_str()
        spec = json.loads(text)
        kinds = tuple((spec.get(part) or {}).get("type") for part in ("normalizer", "pre_tokenizer", "model"))
        right = (tokenizer.padding or {}).get("direction", "right") == "right"
        if kinds != KINDS or (spec.get("post_processor") or {}).get("type") not in TEMPLATES or not right:
            return None
        plain = Tokenizer.from_str(text)
        plain.no_truncation()
        plain.no_padding()
        markers = plain.encode("").ids
        if len(markers) != 2:
            return None
        composer = cls(plain, max_length, markers[:1], markers[1:], plain.encode(".", add_special_tokens=False).ids)
        for title, text in PROBES:
            whole = tokenizer.encode(f"{title}. {text}" if title else text)
            pieces = plain.encode(text, add_special_tokens=False).ids
            ids, _ = composer.input_ids(composer.bodies([title], [pieces])[0])
            if ids != whole.ids or any(whole.type_ids):
                return None
        return composer

    def bodies(self, titles: list[str], pieces: list) -> list:
        """Per row, the pieces of ``title + ". " + chunk`` (the chunk's alone for an empty title), or None where the
        row has no pieces."""
        named = sorted({title for title, ids in zip(titles, pieces) if ids is not None and title})
        encoded = self.tokenizer.encode_batch_fast(named, add_special_tokens=False)
        title_ids = {title: encoding.ids for title, encoding in zip(named, encoded)}
        return [None if ids is None else (title_ids[title] + self.dot + list(ids) if title else list(ids))
                for title, ids in zip(titles, pieces)]

    def input_ids(self, body: list[int]) -> tuple[list[int], bool]:
        """The model's input ids for ``body``, and whether its end was cut off."""
        return self.first + body[:self.room] + self.last, len(body) > self.room


def padded_arrays(rows: list[list[int]], names: tuple[str, ...], pad_id: int) -> dict[str, np.ndarray]:
    """The int64 (batch, longest) arrays ``names`` of ``rows`` of input ids, padded on the right as the tokenizer
    pads a batch: ``pad_id``, a zero attention mask, token type 0."""
    width = max(map(len, rows))
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        mask[i, :len(row)] = 1
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return {name: arrays[name] for name in names}
