"""ColBERT late interaction: a transformer and a linear projection giving one unit vector per token.

The projection maps each token embedding to ``dim`` (384 -> 128 for MiniLM) and the
vectors are L2-normalised. Encoding follows ColBERT: a marker token is inserted after
``[CLS]`` (``[unused0]`` for queries, ``[unused1]`` for documents: vocabulary tokens,
so no embedding matrix has to grow); queries are padded with ``[MASK]`` to
``query_maxlen`` (query augmentation: the masks are not attended to, but their output
vectors take part in scoring); documents are truncated to ``doc_maxlen`` tokens and
lose their padding and punctuation tokens. A relevance score is MaxSim (``maxsim``):
for each query token the best dot product over the document's tokens, summed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from operators.atomic import fsync_tree, replace_folder
from operators.models.colbert.checkpoints import (CONFIG_FILE, FORMAT, LINEAR_FILE, ColbertCheckpointError,
                                                  ColbertConfig, read_checkpoint)
from operators.interrupt import install
from operators.models.references import resolve_model_path
from operators.models.repository import models


@contextlib.contextmanager
def _quiet_transformers():
    """No progress bars or load reports (which list a Stanford checkpoint's linear.weight as unexpected)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


class ColbertModel(torch.nn.Module):
    """A transformer + linear projection producing L2-normalised token vectors (see the module docstring)."""

    def __init__(self, transformer: Any, tokenizer: Any, linear: Any, config: ColbertConfig) -> None:
        super().__init__()
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.linear = linear
        self.config = config
        self.source_path: Path | None = None  # the folder it was loaded from
        self.max_positions = int(getattr(transformer.config, "max_position_embeddings", 512) or 512)
        self.query_marker_id = self._marker_id(config.query_marker, "query_marker")
        self.doc_marker_id = self._marker_id(config.doc_marker, "doc_marker")
        expansion = tokenizer.mask_token_id if tokenizer.mask_token_id is not None else tokenizer.pad_token_id
        if config.query_expansion and expansion is None:
            raise ColbertCheckpointError("query expansion needs a [MASK] or padding token; this tokenizer has "
                                         "neither", field="query_expansion")
        self.expansion_id = expansion
        vocab = tokenizer.get_vocab()
        skip = sorted({vocab[w] for w in config.skiplist if w in vocab})
        self.register_buffer("skip_ids", torch.tensor(skip, dtype=torch.long), persistent=False)

    def _marker_id(self, marker: str | None, field: str) -> int | None:
        if not marker:
            return None
        token_id = self.tokenizer.convert_tokens_to_ids(marker)
        if token_id is None or (token_id == self.tokenizer.unk_token_id and marker != self.tokenizer.unk_token):
            raise ColbertCheckpointError(f"marker {marker!r} is not a token of this checkpoint's tokenizer",
                                         field=field)
        return int(token_id)

    @property
    def device(self):
        return self.linear.weight.device

    @property
    def dim(self) -> int:
        return int(self.linear.weight.shape[0])

    def maxlen(self, *, query: bool, maxlen: int | None = None) -> int:
        """The token limit used for queries or documents (``maxlen`` overrides the checkpoint's)."""
        wanted = maxlen or (self.config.query_maxlen if query else self.config.doc_maxlen)
        return max(3, min(int(wanted), self.max_positions))

    # -- tokens -------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str], *, query: bool, maxlen: int | None = None):
        """Tokenizer tensors with the marker inserted, and the mask of token positions that score."""
        limit = self.maxlen(query=query, maxlen=maxlen)
        marker = self.query_marker_id if query else self.doc_marker_id
        expand = query and self.config.query_expansion
        body = limit - (1 if marker is not None else 0)
        features = self.tokenizer([t if isinstance(t, str) else "" for t in texts], truncation=True,
                                  max_length=body, padding="max_length" if expand else "longest",
                                  return_tensors="pt")
        features = dict(features)
        if marker is not None:
            for name, value in (("input_ids", marker), ("attention_mask", 1), ("token_type_ids", 0)):
                if name in features:
                    ids = features[name]
                    fill = torch.full((ids.shape[0], 1), value, dtype=ids.dtype)
                    features[name] = torch.cat([ids[:, :1], fill, ids[:, 1:]], dim=1)
        attention = features["attention_mask"].bool()
        if expand:
            features["input_ids"] = features["input_ids"].masked_fill(~attention, self.expansion_id)
            keep = torch.ones_like(attention)
            if self.config.attend_to_expansion:
                features["attention_mask"] = torch.ones_like(features["attention_mask"])
        elif query:
            keep = attention
        else:
            # the skip ids follow the model to its device; the tokenizer's tensors are still on the CPU here
            keep = attention & ~torch.isin(features["input_ids"], self.skip_ids.cpu())
        return {k: v.to(self.device) for k, v in features.items()}, keep.to(self.device)

    def forward(self, features: dict) -> Any:
        """[batch, tokens, dim] L2-normalised token vectors (every position; mask them with ``keep``)."""
        hidden = self.transformer(**features, return_dict=True).last_hidden_state
        return torch.nn.functional.normalize(self.linear(hidden), p=2, dim=-1)

    # -- encoding ---------------------------------------------------------------------

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32,
                       maxlen: int | None = None) -> list[np.ndarray]:
        """One float32 [tokens, dim] matrix per query (query_maxlen rows with query expansion)."""
        return self._encode(texts, query=True, batch_size=batch_size, maxlen=maxlen)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, maxlen: int | None = None,
                         on_batch: Callable[[int], None] | None = None) -> list[np.ndarray]:
        """One float32 [tokens, dim] matrix per document (no padding or punctuation rows); ``on_batch(n)``
        after each forward pass of ``n`` documents (a progress bar over a long list)."""
        return self._encode(texts, query=False, batch_size=batch_size, maxlen=maxlen, on_batch=on_batch)

    def _encode(self, texts: Sequence[str], *, query: bool, batch_size: int, maxlen: int | None,
                on_batch: Callable[[int], None] | None = None):
        texts = [t if isinstance(t, str) else "" for t in texts]
        out: list[np.ndarray | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad less
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(order), batch_size):
                    rows = order[start:start + batch_size]
                    features, keep = self.tokenize([texts[i] for i in rows], query=query, maxlen=maxlen)
                    vectors = self(features).float().cpu().numpy()
                    keep = keep.cpu().numpy()
                    for j, i in enumerate(rows):
                        out[i] = np.ascontiguousarray(vectors[j][keep[j]], dtype=np.float32)
                    if on_batch is not None:
                        on_batch(len(rows))
        finally:
            self.train(was_training)
        return out  # type: ignore[return-value]

    # -- saving -----------------------------------------------------------------------

    def save(self, folder: str | os.PathLike, *, extra_files: dict[str, str] | None = None) -> Path:
        """Write Tessera's layout (``checkpoints`` (a)) into ``folder`` atomically (a temporary sibling,
        then a rename), with ``extra_files`` (name -> text) beside the weights."""
        from safetensors.torch import save_file

        folder = Path(folder).expanduser()
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            self.transformer.save_pretrained(str(tmp), safe_serialization=True)
            self.tokenizer.save_pretrained(str(tmp))
            save_file({"weight": self.linear.weight.detach().cpu().contiguous()}, str(tmp / LINEAR_FILE))
            config = {**self.config.model_dump(), "dim": self.dim, "layout": "tessera", "format": FORMAT}
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1), encoding="utf-8")
            for name, text in (extra_files or {}).items():
                (tmp / name).write_text(text, encoding="utf-8")
            fsync_tree(tmp)
            replace_folder(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return folder

    # -- loading ----------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | None = None, new_projection: int | None = None,
             seed: int = 0, **overrides: Any):
        """Read a checkpoint in any layout ``checkpoints.read_checkpoint`` knows.

        ``new_projection``: for a plain encoder (no projection anywhere), add a fresh
        ``hidden -> new_projection`` projection (orthogonal, seeded) instead of failing:
        the start of training. ``overrides`` replace ``ColbertConfig`` fields.
        """
        path = Path(path)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        transformer_dir, weight, config = read_checkpoint(path)
        if weight is None and not new_projection:  # said before the transformer's weights are loaded for nothing
            raise ColbertCheckpointError(
                f"{path} has no ColBERT projection (no {LINEAR_FILE}, Dense module or linear.weight): it is "
                "a plain encoder; train a ColBERT model from it (tessera train, flows.train.colbert)", field="model")
        from transformers import AutoModel, AutoTokenizer

        with _quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(transformer_dir), local_files_only=True)
            transformer = AutoModel.from_pretrained(str(transformer_dir), local_files_only=True).float()
        hidden = int(transformer.config.hidden_size)
        if weight is None:
            generator = torch.Generator().manual_seed(seed)
            weight = torch.empty(new_projection, hidden)
            torch.nn.init.orthogonal_(weight, generator=generator)
        if weight.shape[1] != hidden:
            raise ColbertCheckpointError(f"{path}: the projection takes {weight.shape[1]} features but the "
                                         f"transformer gives {hidden}", field="model")
        linear = torch.nn.Linear(hidden, weight.shape[0], bias=False)
        with torch.no_grad():
            linear.weight.copy_(weight.float())
        config = config.model_copy(update={"dim": int(weight.shape[0]), **overrides})
        model = cls(transformer, tokenizer, linear, ColbertConfig.model_validate(config.model_dump()))
        model.source_path = path
        return model.to(device or _default_device()).eval()

    def identity(self) -> str:
        """Short hex of what decides the token vectors: every weight (by content) and the encoding settings.
        Precomputed document tokens are filed under it, so a retrained or edited model never reads stale ones."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        settings = self.config.model_dump(exclude={"layout", "query_maxlen", "doc_maxlen"})
        digest.update(json.dumps(settings, sort_keys=True).encode())
        return digest.hexdigest()[:16]


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_colbert(reference: str, device: str | None = None):
    """A ``ColbertModel`` for ``reference`` (a trained name, a folder, ...), shared per process."""
    path = resolve_model_path(reference)
    return models.get_or_create("colbert", {"path": str(path), "device": device},
                                lambda: install(ColbertModel.load(path, device=device)))


def new_colbert(base: str = "minilm", *, dim: int = 128, seed: int = 0, device: str | None = None,
                **overrides: Any):
    """A ColBERT model built on ``base``: its own projection if it has one, else a fresh seeded one."""
    return ColbertModel.load(resolve_model_path(base), device=device, new_projection=dim, seed=seed, **overrides)


def maxsim(query: np.ndarray, documents: Sequence[np.ndarray], *, aggregation: str = "sum",
           similarity: str = "cosine") -> np.ndarray:
    """ColBERT scores of one query's token matrix against each document's token matrix.

    For every query token the best similarity over the document's tokens, then the
    sum (or the mean) over query tokens. ``l2`` checkpoints score ``-|q - d|^2``,
    which on unit vectors is ``2 q.d - 2``. A document without tokens scores 0.
    """
    query = np.asarray(query, dtype=np.float32)
    scores = np.zeros(len(documents), dtype=np.float64)
    lengths = np.array([len(d) for d in documents], dtype=np.int64)
    present = np.nonzero(lengths)[0]
    if len(present) and len(query):
        tokens = np.concatenate([np.asarray(documents[i], dtype=np.float32) for i in present])
        sims = query @ tokens.T  # [query tokens, all document tokens]
        starts = np.r_[0, np.cumsum(lengths[present])[:-1]]
        best = np.maximum.reduceat(sims, starts, axis=1).astype(np.float64)  # [query tokens, documents]
        if similarity == "l2":
            best = 2.0 * best - 2.0
        scores[present] = best.sum(axis=0) if aggregation == "sum" else best.mean(axis=0)
    return scores
