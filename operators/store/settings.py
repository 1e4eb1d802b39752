"""The index's pydantic models: its settings, one shard's record, the manifest.

They are the JSON of ``manifest.json``; ``ShardInfo`` also travels from Ray
workers (``write_shard``) to the driver (``commit``), so it is small and picklable.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Mapping, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from operators.errors import unknown_name_hint, user_field, value_problem

DenseType = Literal["flat", "hnsw", "ivf", "ivfpq", "sq8", "hnsw_sq8"]
BM25Method = Literal["robertson", "lucene", "atire", "bm25l", "bm25+"]

#: dense_options keys and the index types that read them.
DENSE_OPTIONS = {
    "M": ("hnsw", "hnsw_sq8"),
    "efConstruction": ("hnsw", "hnsw_sq8"),
    "efSearch": ("hnsw", "hnsw_sq8"),
    "nlist": ("ivf", "ivfpq", "sq8"),
    "nprobe": ("ivf", "ivfpq", "sq8"),
    "pq_m": ("ivfpq",),
    "pq_nbits": ("ivfpq",),
    "k_factor": ("ivfpq",),
}

#: The manifest format this release writes. 2 (2026-11-30): ``merged_shards`` is recorded; a format-1 manifest is
#: read, and written as format 2 at its first write (``operators.store.upgrade``).
FORMAT = 2
#: Every format this release reads.
FORMATS = (1, 2)


class IndexSettings(BaseModel):
    """What an index is built with; fixed when the index is created."""

    model_config = ConfigDict(extra="forbid")

    encoder: str = Field("all-MiniLM-L6-v2", description="Model that embeds chunks and queries.")
    dense: bool = Field(True, description="Keep a FAISS index per shard (chunks must carry a vector).")
    dim: int = Field(384, gt=0, description="Vector dimension.")
    dense_type: DenseType = Field("flat", description="FAISS index type of each shard.")
    dense_options: dict[str, int] = Field(
        default_factory=dict,
        description="FAISS knobs: M, efConstruction, efSearch (HNSW); nlist, nprobe (IVF); pq_m, pq_nbits (PQ).")
    bm25: bool = Field(True, description="Keep BM25 term statistics per shard.")
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    delta: float = Field(0.5, ge=0, description="BM25L/BM25+ delta.")
    method: BM25Method = Field("lucene", description="bm25s scoring variant.")
    stemmer: str | None = Field("english", description="PyStemmer language, or null for none.")
    stopwords: str | list[str] | None = Field("en", description="bm25s stopwords: a language code, a list, or null.")
    text_fields: list[str] = Field(["title", "text"], min_length=1,
                                   description="Doc-store columns BM25 indexes, joined with a space.")
    tokens: Literal["cjk_bigrams", "unicode", "bm25s"] = Field(
        "cjk_bigrams", description="How BM25 cuts text into words: 'unicode' keeps combining marks (vowel signs, "
        "diacritics) inside a word and drops invisible format characters (soft hyphen, zero-width space); "
        "'cjk_bigrams' does too, and cuts runs of Chinese, Japanese and Korean characters into overlapping pairs "
        "(under 'unicode', which indices made from 2026-12-06 to 2026-12-07 keep, such a run is one word); 'bm25s' "
        "is bm25s's \\w\\w+, which cut words with marks apart (every index made before 2026-12-06 keeps it).")

    @field_validator("dense_options")
    @classmethod
    def _known_options(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(DENSE_OPTIONS))
        if unknown:
            raise ValueError(f"unknown dense_options {unknown}; known: {sorted(DENSE_OPTIONS)}")
        bad = {k: v for k, v in value.items() if v <= 0}
        if bad:
            raise ValueError(f"dense_options must be positive, got {bad}")
        return value

    @field_validator("stemmer")
    @classmethod
    def _a_stemmer_language(cls, value: str | None) -> str | None:
        """PyStemmer's name (``english``, ``porter``, ...): another failed only when the first shard was written,
        after its documents were read and embedded."""
        if value is None or value == "english":
            return value
        import Stemmer

        try:
            Stemmer.Stemmer(value)  # its names (english) and ISO codes (en, eng)
        except KeyError:
            from operators.errors import close_names, did_you_mean

            known = Stemmer.algorithms()
            hint = did_you_mean(close_names(value, known)) or f"one of {', '.join(known)}"
            raise ValueError(f"'{value}' is no PyStemmer language; {hint} (or null for no stemming)") from None
        return value

    @field_validator("stopwords")
    @classmethod
    def _a_stopwords_language(cls, value: str | list[str] | None) -> str | list[str] | None:
        """A language bm25s has stopwords for (``en``, ``de``, ...): another failed only when the first shard was
        written; a list's words lower-cased, as the tokens are."""
        if isinstance(value, list):  # tokens are lower-cased: "Der" in the list removed nothing
            return list(dict.fromkeys(word.lower() for word in value))
        if value is None:
            return value
        value = value.strip().lower()  # "German", as the stemmer's names are taken
        if value in ("en", "english"):
            return value
        from operators.bm25s_import import load_bm25s

        load_bm25s()
        from bm25s.tokenization import _infer_stopwords

        try:
            _infer_stopwords(value)
        except ValueError:
            import bm25s.stopwords

            from operators.errors import close_names, did_you_mean

            names = [n.removeprefix("STOPWORDS_").lower() for n in vars(bm25s.stopwords) if n.startswith("STOPWORDS_")]
            hint = did_you_mean(close_names(value, names))
            raise ValueError(f"'{value}' is no language bm25s has stopwords for (en, de, nl, fr, es, pt, it, ru, sv, "
                             f"no, zh, tr, ko, da, or their English names); {hint + ' A' if hint else 'a'} list of "
                             "words, or null for none, is taken too") from None
        return value

    @model_validator(mode="after")
    def _something_to_search(self) -> "IndexSettings":
        if not (self.dense or self.bm25):
            raise ValueError("an index needs dense or bm25 (both are false)")
        return self


class DenseInfo(BaseModel):
    """How a shard's FAISS index was built (``factory`` differs from the type on fallback)."""

    model_config = ConfigDict(extra="forbid")

    type: DenseType
    factory: str
    fallback: str | None = None  # why the requested type was not built


class ShardInfo(BaseModel):
    """One finished shard, as ``write_shard`` wrote it and the manifest records it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    n_chunks: int
    files: dict[str, str]  # file name -> sha256
    columns: list[str]
    dense: DenseInfo | None = None
    n_terms: int | None = None
    token: str  # unique per write: tells two writes of the same shard id apart
    created_at: float = Field(default_factory=time.time)
    #: The embed params its vectors were made with, as a fingerprint (``flows.ingestion.reuse``); None: not known.
    embedded_as: str | None = None


class Manifest(BaseModel):
    """``manifest.json``; unknown top-level keys (written by other tools) are kept."""

    model_config = ConfigDict(extra="allow")

    format: Literal[1, 2] = FORMAT
    settings: IndexSettings
    generation: int = 0
    shards: list[ShardInfo] = Field(default_factory=list)
    #: shard id -> sorted row positions (into docs.parquet) that are deleted or replaced.
    tombstones: dict[str, list[int]] = Field(default_factory=dict)
    #: ids of the shards compactions merged into the listed ones, sorted: still committed, so an ingestion run again
    #: skips them (``commit_shards.finished``).
    merged_shards: list[str] = Field(default_factory=list)
    #: The fingerprint of the encoder's files when the index was made (``operators.models.fingerprint``): a model
    #: retrained since under the same name embeds queries in another space than the index's vectors. None: made
    #: before it was recorded, without vectors, or without the model on that machine.
    encoder_weights: str | None = None
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    @model_validator(mode="before")
    @classmethod
    def _tokens_of_earlier_indices(cls, data: Any) -> Any:
        """A manifest whose settings name no ``tokens`` was written before they existed: its shards' BM25 terms are
        bm25s's, and its queries must be cut the same way."""
        if isinstance(data, dict) and isinstance(data.get("settings"), dict) and "tokens" not in data["settings"]:
            data = {**data, "settings": {**data["settings"], "tokens": "bm25s"}}
        return data

    def shard(self, shard_id: str) -> ShardInfo | None:
        return next((s for s in self.shards if s.id == shard_id), None)

    def same_version(self, other: "Manifest") -> bool:
        """Whether both are one version of one index: the generation, and the creation time, since an index
        deleted and made again at the same path starts its generations again."""
        return self.generation == other.generation and self.created_at == other.created_at

    def counts(self) -> dict[str, Any]:
        chunks = sum(s.n_chunks for s in self.shards)
        dead = sum(len(rows) for rows in self.tombstones.values())
        return {"shards": len(self.shards), "chunks": chunks, "tombstones": dead, "live_chunks": chunks - dead}


class SettingsProblem(NamedTuple):
    """The first problem of index settings in the words a param's error uses (``operators.errors.value_problem``:
    what the value must be and the value given; an unknown key with the close names), not pydantic's "Input should
    be a valid number". ``key``: the setting (dotted), None for a check of the whole; ``given``: the value given."""

    message: str
    key: str | None
    given: Any = None


def settings_problem(value: Any) -> SettingsProblem | None:
    """The first ``SettingsProblem`` of ``value`` read as ``IndexSettings``, or None: said alike by the store
    (``Index.create``), a spec's ``index_settings`` and an ingestion's settings (``flows.spec_checks``)."""
    if isinstance(value, Mapping) and (unknown := [key for key in value if key not in IndexSettings.model_fields]):
        return SettingsProblem(f"unknown index setting '{unknown[0]}'"
                               f"{unknown_name_hint(unknown[0], IndexSettings.model_fields, 'settings')}", unknown[0])
    try:
        IndexSettings.model_validate(value)
    except ValidationError as err:
        errors = err.errors()
        return SettingsProblem(value_problem(errors[0], errors), user_field(errors[0], errors) or None,
                               errors[0].get("input"))
    return None
