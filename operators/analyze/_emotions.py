"""The three emotion scorers behind ``analyze.sentiment``: prototypes, lexicon, classifier.

Each scorer has ``labels`` and ``score(texts) -> (len(texts), len(labels))`` float
array; a row of zeros means "no evidence" (the operator then writes a null label).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

#: The six emotions of mosaicRAG's seed (the labels of the dair-ai "emotion" data set).
EMOTIONS = ("sadness", "joy", "love", "anger", "fear", "surprise")

#: Prototype sentences per emotion: short first-person statements plus typical situations, since
#: a bi-encoder places a text near the situations it describes more than near emotion words.
DEFAULT_PROTOTYPES: dict[str, list[str]] = {
    "sadness": ["I feel sad and unhappy.", "I am heartbroken and grieving a loss.",
                "I feel lonely, miserable and depressed.", "I cried all night, full of sorrow.",
                "Someone I loved died and I miss them terribly.", "I feel hopeless and disappointed."],
    "joy": ["I feel happy and cheerful.", "I am so glad and delighted!", "What a wonderful, joyful day.",
            "I am excited and thrilled about the good news.", "We laughed and celebrated our success.",
            "I feel proud and satisfied."],
    "love": ["I love you with all my heart.", "I adore my partner and feel so much affection.",
             "I feel loved, cared for and tender.", "We are deeply in love and want to be together.",
             "I miss my sweetheart and long to hold them.", "My family means everything to me."],
    "anger": ["I am angry and furious.", "This makes me so mad, I am outraged.", "I hate this, it is infuriating.",
              "I feel irritated and annoyed by their rude behaviour.", "They treated me unfairly and I am fed up.",
              "I want to yell at them for what they did."],
    "fear": ["I am scared and afraid.", "I feel anxious, nervous and worried.", "I am terrified, full of dread.",
             "I panicked because I was frightened.", "I am afraid something terrible will happen.",
             "The danger made me tremble with fear."],
    "surprise": ["I am surprised, I did not expect that!", "Wow, I am amazed and astonished.",
                 "That was shocking and unexpected.", "I can't believe it, what a surprise!",
                 "It came out of nowhere and caught me off guard.", "I was stunned by the sudden news."],
}


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


class PrototypeScorer:
    """Softmax over the mean cosine similarity of a text to each label's prototype sentences."""

    def __init__(self, model, prototypes: Mapping[str, Sequence[str]], temperature: float, batch_size: int,
                 cache_key: Mapping[str, object]):
        from operators.models import models

        self.model = model
        self.labels = list(prototypes)
        self.temperature = temperature
        self.batch_size = batch_size
        # Mean similarity to a label's prototypes = similarity to the (unnormalised) mean of their vectors;
        # the means are computed once per process and model, shared by every operator instance.
        self.centroids = models.get_or_create("emotion_prototypes", {**cache_key, "prototypes": dict(prototypes)},
                                              lambda: self._centroids(prototypes))

    def _centroids(self, prototypes: Mapping[str, Sequence[str]]) -> np.ndarray:
        return np.stack([self._encode(list(prototypes[label])).mean(axis=0) for label in self.labels])

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=False), dtype=np.float64)

    def score(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, len(self.labels)))
        return softmax(self._encode(texts) @ self.centroids.T / self.temperature)


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


class LexiconScorer:
    """Share of each emotion among the NRC-tagged words of a text (see ``SentimentAnalyzer``'s docstring)."""

    labels = list(EMOTIONS)

    def __init__(self, additions: Mapping[str, Sequence[str]]):
        try:
            from nrclex import NRCLex
        except ImportError:
            raise ImportError("method 'lexicon' needs the NRC emotion lexicon: pip install tessera[lexicon] "
                              "(the nrclex package)") from None
        self.nrc = NRCLex()
        self.additions = {word.lower(): list(emotions) for word, emotions in additions.items()}

    def score(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(self.labels)))
        for row, text in enumerate(texts):
            counts: Counter[str] = Counter()
            looked_up = []
            for word in _WORD.findall(text.lower()):
                if word in self.additions:
                    counts.update(self.additions[word])
                else:
                    looked_up.append(word if word in self.nrc.__lexicon__ else _lemma(word))
            self.nrc.load_token_list(looked_up)
            counts.update(self.nrc.raw_emotion_scores)
            values = np.array([counts.get(label, 0) for label in self.labels], dtype=np.float64)
            if values.sum() > 0:
                out[row] = values / values.sum()
        return out


@functools.lru_cache(maxsize=65536)
def _lemma(word: str) -> str:
    """English lemma ("loved" -> "love"), so inflected forms find the lexicon's base forms."""
    import simplemma

    return simplemma.lemmatize(word, lang="en")


class ClassifierScorer:
    """A Hugging Face text-classification checkpoint; labels are its ``id2label`` (lowercased)."""

    def __init__(self, pipe, batch_size: int):
        self.pipe = pipe
        config = pipe.model.config
        self.raw_labels = [config.id2label[i] for i in range(len(config.id2label))]
        self.labels = [str(label).lower() for label in self.raw_labels]
        self.batch_size = batch_size

    def score(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(self.labels)))
        if not texts:
            return out
        column = {label: i for i, label in enumerate(self.raw_labels)}
        results = self.pipe(texts, top_k=None, truncation=True, batch_size=self.batch_size)
        for row, ranked in enumerate(results):
            for item in ranked:
                out[row, column[item["label"]]] = item["score"]
        return out


def load_classifier(reference: str, *, device: str | None):
    """A transformers text-classification pipeline for a local checkpoint, shared per process, offline."""
    from operators.models import ModelNotFoundError, models, resolve_model_path

    hint = ("method 'classifier' needs a local Hugging Face text-classification checkpoint folder, e.g. "
            "bhadresh-savani/distilbert-base-uncased-emotion fetched on a machine with internet "
            "(`hf download bhadresh-savani/distilbert-base-uncased-emotion --local-dir <folder>`), then "
            "params.model: <folder>")
    try:
        path = resolve_model_path(reference)
    except ModelNotFoundError as err:
        raise ModelNotFoundError(f"{err.message}. {hint}") from None
    config = json.loads((path / "config.json").read_text(encoding="utf-8")) if (path / "config.json").is_file() else {}
    architectures = config.get("architectures") or []
    if not any(str(arch).endswith("ForSequenceClassification") for arch in architectures):
        raise ModelNotFoundError(f"model folder {path} holds {architectures or 'no architecture'}, not a "
                                 f"*ForSequenceClassification checkpoint; {hint}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    def build():
        from transformers import pipeline
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        return pipeline("text-classification", model=str(path), tokenizer=str(path), device=device)

    return models.get_or_create("text_classification", {"path": str(Path(path)), "device": device}, build)
