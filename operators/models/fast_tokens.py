"""A transformer sentence-transformers model's encode (or a cross-encoder's predict), tokenized by the Rust
tokenizer directly.

Why: on a GPU the forward pass is not what bounds ``SentenceTransformer.encode``; its tokenizing
is. On an H200 MiniLM's forward alone ran 43,307 passages/s while ``encode`` ran 3,300-3,600/s,
and the transformers tokenizer call it makes took 4,176/s by itself: that call turns each Rust
``Encoding`` into Python lists and back into tensors. The ``tokenizers`` library's own
``encode_batch`` tokenized the same passages at 25,595/s (benchmarks/gpu/RESULTS.md). Here the
model's own Rust tokenizer, copied with the model's truncation and padding to the batch's longest
text, makes the batch's tensors; the model's modules (transformer, pooling, normalize) run as
sentence-transformers runs them, and while a GPU works on one batch a thread tokenizes the next
(the Rust call releases the GIL). Texts are batched longest first, as ``encode`` batches them.

A cross-encoder's ``predict`` tokenizes its (query, text) pairs the same way, and is bound the same
way on a GPU (2,876 pairs/s on the H200, where its forward passes cost what MiniLM's do): the pairs
go to the Rust tokenizer as pairs, truncated longest first as the model's own tokenizing does.

It applies only where the result is the same: a model whose first module is a text-only
``Transformer`` with a fast tokenizer, and whose tokenizing here gives the same tensors as the
model's own on probe inputs (checked once, when the model is set up). Anything else keeps the
library's ``encode``/``predict``. ``tests/operators/embed/test_fast_tokens.py`` compares the vectors,
``tests/operators/rerank/test_cross_encoder_fast_tokens.py`` the scores.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np

log = logging.getLogger(__name__)

#: Texts whose tokenizing is compared with the model's own before the fast path is used: short,
#: empty, accented, mixed case, and one far past any model's truncation length.
PROBES = (
    "Honey bees communicate by dancing.",
    "",
    "Ünïcödé naïve café — déjà vu; CAPITALS and digits 12,345.67!",
    " ".join(["a long passage about retrieval and ranking"] * 200),
)
#: (query, text) pairs for a cross-encoder: an empty text, and long pairs that truncation cuts longest first.
PAIR_PROBES = ((PROBES[0], PROBES[2]), (PROBES[2], ""), ("what do bees make?", PROBES[3]), (PROBES[3], PROBES[3]),
               (PROBES[3], PROBES[0]))


def batching(tokenizer, max_length: int, *, pad_id: int = 0, pad_token: str = "[PAD]"):
    """``tokenizer`` (a ``tokenizers.Tokenizer``) set to tokenize a batch as sentence-transformers does: truncated
    at ``max_length`` longest first, padded to the batch's longest with the tokenizer's own padding where it has
    one (else ``pad_id``/``pad_token``, on the right)."""
    padding = tokenizer.padding or {}
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    tokenizer.enable_padding(pad_id=padding.get("pad_id", pad_id), pad_token=padding.get("pad_token", pad_token),
                             pad_type_id=padding.get("pad_type_id", 0), direction=padding.get("direction", "right"))
    return tokenizer


def token_arrays(encodings, names) -> dict[str, np.ndarray]:
    """The int64 (batch, tokens) arrays ``names`` (``input_ids``, ``token_type_ids``, ``attention_mask``) of a
    padded batch of ``tokenizers`` encodings."""
    attribute = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}
    return {name: np.array([getattr(e, attribute[name]) for e in encodings], dtype=np.int64) for name in names}


def longest_first(inputs: list) -> np.ndarray:
    """The order sentence-transformers batches texts (or (query, text) pairs) in: longest first, by characters."""
    return np.argsort([-(len(item) if isinstance(item, str) else sum(map(len, item))) for item in inputs],
                      kind="stable")


class FastTokenEncoder:
    """Run a transformer sentence-transformers model (or cross-encoder) over inputs tokenized in Rust."""

    def __init__(self, model, tokenizer, feature_names: tuple[str, ...]):
        self.model = model
        self.tokenizer = tokenizer  # a copy of the model's Rust tokenizer, truncating and padding
        self.feature_names = feature_names  # the tensors the model's own tokenizing makes
        #: Inputs tokenized so far that were longer than the model reads (truncated: their ends never reach it).
        self.truncated = 0
        self._composer = False  # not looked for yet (``composer``)

    @property
    def composer(self):
        """A ``PieceComposer`` when this model's inputs can be composed from a chunk's piece ids, else None."""
        if self._composer is False:
            from operators.models.piece_inputs import PieceComposer

            self._composer = PieceComposer.of(self.tokenizer, self.model.max_seq_length)
        return self._composer

    @classmethod
    def of(cls, model, probes: tuple = PROBES) -> "FastTokenEncoder | None":
        """For a model this path runs exactly as the library does on inputs like ``probes`` (texts, or
        (query, text) pairs for a cross-encoder); else None."""
        from sentence_transformers.base.modules.transformer import Transformer
        from tokenizers import Tokenizer

        first = next(iter(model._modules.values()), None)
        backend = getattr(getattr(first, "tokenizer", None), "backend_tokenizer", None)
        if (not isinstance(first, Transformer) or backend is None or set(first.modality_config) != {"text"}
                or not model.max_seq_length):
            return None
        try:
            own = first.tokenizer
            tokenizer = batching(Tokenizer.from_str(backend.to_str()), model.max_seq_length,
                                 pad_id=own.pad_token_id or 0, pad_token=own.pad_token or "[PAD]")
            expected = model.preprocess(list(probes))
            names = tuple(name for name in ("input_ids", "token_type_ids", "attention_mask") if name in expected)
            encoder = cls(model, tokenizer, names)
            produced = encoder._features(list(probes))
        except Exception as error:  # noqa: BLE001  (the library's own path is always right: fall back to it)
            log.debug("tokenizing in Rust does not apply to this model: %s", error)
            return None
        if {"input_ids", "attention_mask"} - set(names) or any(not _same(expected[n], produced[n]) for n in names):
            return None  # flattened inputs (no padded batch) or other tokens than the model's own
        return encoder

    def _features(self, inputs: list, bodies: list | None = None) -> dict:
        """The model's input tensors for one batch of texts or (query, text) pairs, on the CPU; where ``bodies``
        has a text's pieces (``PieceComposer.bodies``), they are its input and the text is not tokenized."""
        import torch

        if bodies is None or all(body is None for body in bodies):
            encodings = self.tokenizer.encode_batch_fast(inputs)
            self.truncated += sum(1 for encoding in encodings if encoding.overflowing)
            arrays = token_arrays(encodings, self.feature_names)
        else:
            arrays = self._composed_arrays(inputs, bodies)
        return {**{name: torch.from_numpy(array) for name, array in arrays.items()}, "modality": "text"}

    def _composed_arrays(self, inputs: list, bodies: list) -> dict[str, np.ndarray]:
        """``_features``' arrays for a batch some of whose texts come as pieces: the same arrays the tokenizer
        would make of the texts (``PieceComposer.of`` checked it)."""
        from operators.models.piece_inputs import padded_arrays

        rows: list = [None] * len(inputs)
        todo = [i for i, body in enumerate(bodies) if body is None]
        for i, encoding in zip(todo, self.tokenizer.encode_batch_fast([inputs[i] for i in todo]) if todo else []):
            self.truncated += bool(encoding.overflowing)
            rows[i] = encoding.ids[:sum(encoding.attention_mask)]  # padded on the right (PieceComposer.of)
        for i, body in enumerate(bodies):
            if body is not None:
                rows[i], cut = self.composer.input_ids(body)
                self.truncated += cut
        return padded_arrays(rows, self.feature_names, (self.tokenizer.padding or {}).get("pad_id", 0))

    def encode(self, texts: list[str], batch_size: int, normalize: bool, bodies: list | None = None) -> np.ndarray:
        """(n, dim) float32 vectors, in the order of ``texts`` (``SentenceTransformer.encode``'s); ``bodies``: the
        texts' pieces where a chunker gave them (``PieceComposer.bodies``; only when ``composer`` is not None)."""
        import torch

        def vectors(output: dict):
            embeddings = output["sentence_embedding"]
            return torch.nn.functional.normalize(embeddings, p=2, dim=1) if normalize else embeddings

        return self._run(texts, batch_size, vectors, bodies)

    def scores(self, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
        """The raw outputs (logits) for each (query, text) pair, in order: ``CrossEncoder.predict``'s with
        ``activation_fn=Identity()``, one label's squeezed to (n,)."""
        scores = self._run(pairs, batch_size, lambda output: output["scores"])
        return scores[:, 0] if scores.ndim == 2 and scores.shape[1] == 1 else scores

    def _run(self, inputs: list, batch_size: int, output, bodies: list | None = None) -> np.ndarray:
        """``output(model(batch))`` for each batch of ``inputs``, longest first as the library batches them, as
        float32 rows in the order of ``inputs``."""
        import torch
        from sentence_transformers.util import batch_to_device

        order = longest_first(inputs)
        batches = [([inputs[i] for i in part], None if bodies is None else [bodies[i] for i in part])
                   for part in (order[start:start + batch_size] for start in range(0, len(inputs), batch_size))]
        device = self.model.device
        rows = []
        self.model.eval()
        with torch.inference_mode():
            for features in self._batch_features(batches, overlap=device.type != "cpu"):
                rows.append(output(self.model(batch_to_device(features, device))).float().cpu().numpy())
        stacked = np.concatenate(rows)
        result = np.empty_like(stacked)
        result[order] = stacked
        return result

    def _batch_features(self, batches: list[list], overlap: bool):
        """Each batch's tensors in turn. With ``overlap`` (a GPU) a thread tokenizes the next batch while the caller
        runs the current one; on a CPU the forward pass has every core already, so batches are tokenized in turn."""
        if not overlap:
            yield from (self._features(*batch) for batch in batches)
            return
        with ThreadPoolExecutor(max_workers=1) as prefetch:
            pending = prefetch.submit(self._features, *batches[0])
            for following in batches[1:] + [None]:
                features = pending.result()
                if following is not None:
                    pending = prefetch.submit(self._features, *following)
                yield features


def _same(expected, produced) -> bool:
    return tuple(expected.shape) == tuple(produced.shape) and bool((expected.cpu() == produced).all())
