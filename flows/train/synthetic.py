"""Pseudo-queries drawn from a corpus (the inverse cloze task), for training with few judged queries.

A few hundred judged queries are too few for a cross-encoder that starts from a
bi-encoder: it has to learn relevance from nothing. The corpus itself holds far
more: a sentence of a document is a query that its document answers, which is the
inverse cloze task of ORQA (Lee et al., 2019). The positive is the document with
that sentence taken out (kept with probability ``keep_sentence``), so the model has
to match meaning, not copy words; hard negatives are mined for the sentence exactly
as for a judged query (``flows.train.mining``).

No judgement is read: a pseudo-query comes from the corpus alone, so this is
unsupervised domain adaptation on the documents a user indexes (as GPL does), and
it can use the corpus of an evaluation set without touching its queries or qrels.
``corpora`` draws more pseudo-queries from other corpora (each mined on its own
index), so a model trained on one narrow domain also sees general text.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from operators.sources._common import default_id

# a sentence ends at . ! or ? followed by space and a capital letter or digit: good enough for abstracts and
# encyclopaedia text, where a missed split only makes a pseudo-query longer (and then it is skipped)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
# structured abstracts start sections with a capitalised label ("RESULTS There was ..."): not part of a query
_SECTION_LABEL = re.compile(r"^(?:[A-Z]{4,}\s+)+(?=\S)")

#: the model kinds ``tessera train`` trains (flows.train.recipe.KINDS)
ModelKind = Literal["cross-encoder", "bi-encoder", "colbert"]


class OtherCorpus(BaseModel):
    """Another corpus pseudo-queries are drawn from: no queries or judgements are needed, only documents."""

    model_config = ConfigDict(extra="forbid")

    corpus: str = Field(description="A BEIR-layout folder or a corpus.jsonl file (a relative path is read from the "
                        "working directory, like --dataset).")
    queries: int = Field(gt=0, description="Pseudo-queries to draw from it.")
    seed: int | None = Field(None, description="Seed of its sampling (default: the section's seed).")

    def corpus_file(self) -> Path:
        path = Path(self.corpus).expanduser()
        return path / "corpus.jsonl" if path.is_dir() else path


class SyntheticParams(BaseModel):
    """How many pseudo-queries to draw from the corpus, and which models train on them."""

    model_config = ConfigDict(extra="forbid")

    queries: int = Field(0, ge=0, description="Pseudo-queries to draw, one per document sampled (0: none).")
    min_words: int = Field(6, gt=0, description="Shortest sentence used as a pseudo-query.")
    max_words: int = Field(40, gt=0, description="Longest sentence used as a pseudo-query.")
    keep_sentence: float = Field(0.1, ge=0, le=1, description="Chance that the sentence stays in its positive "
                                 "(ORQA kept it 10% of the time, so lexical overlap still counts for something).")
    kinds: list[ModelKind] = Field(default_factory=lambda: ["cross-encoder"],
                             description="Model kinds that train on the pseudo-queries as well.")
    seed: int = Field(0, description="Seed of the sampling of documents and sentences.")
    corpora: list[OtherCorpus] = Field(default_factory=list, description="Other corpora that pseudo-queries are "
                                       "also drawn from, each mined on its own index (general text beside a narrow "
                                       "domain, say).")

    def wanted(self) -> bool:
        return bool(self.queries or self.corpora)

    def for_corpus(self, other: OtherCorpus) -> "SyntheticParams":
        """These settings with ``other``'s count and seed, for drawing from ``other``."""
        seed = self.seed if other.seed is None else other.seed
        return self.model_copy(update={"queries": other.queries, "seed": seed, "corpora": []})

    @model_validator(mode="after")
    def _word_range(self) -> "SyntheticParams":
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) is larger than max_words ({self.max_words})")
        return self


@dataclass(frozen=True)
class PseudoQuery:
    qid: str
    query: str
    docno: str
    positive: str  # the document as the rerankers read it, with the sentence taken out (usually)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


def pseudo_queries(corpus: str | Path, params: SyntheticParams) -> list[PseudoQuery]:
    """Up to ``params.queries`` pseudo-queries, one per sampled document that has a usable sentence."""
    from operators.tables import document_text

    if params.queries == 0:
        return []
    docs, seen = [], set()
    with open(corpus, encoding="utf-8-sig") as f:  # as ingestion reads it: a byte order mark dropped
        for line in f:
            if line.strip():
                doc = json.loads(line)
                docno = default_id(doc) or ""
                if docno and docno in seen:
                    continue  # a repeated id: its first copy is the document, as in ingestion (flows.train.corpus)
                seen.add(docno)
                docs.append((docno, doc.get("title") or "", doc.get("text") or ""))
    rng = random.Random(params.seed)
    rng.shuffle(docs)
    out: list[PseudoQuery] = []
    for docno, title, text in docs:
        parts = sentences(text)
        usable = [i for i, s in enumerate(parts) if params.min_words <= len(s.split()) <= params.max_words]
        if len(parts) < 2 or not usable:
            continue  # a one-sentence document would leave an empty positive
        i = rng.choice(usable)
        rest = parts if rng.random() < params.keep_sentence else parts[:i] + parts[i + 1:]
        query = _SECTION_LABEL.sub("", parts[i])
        out.append(PseudoQuery(f"pseudo-{docno}", query, docno, document_text(" ".join(rest), title)))
        if len(out) == params.queries:
            break
    return out
