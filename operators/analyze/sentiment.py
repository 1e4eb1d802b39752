"""Emotion chip: sadness, joy, love, anger, fear or surprise, per row."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from operators.analyze._emotions import DEFAULT_PROTOTYPES, EMOTIONS
from operators.base import Operator
from operators.errors import OperatorError
from operators.models import DEFAULT_ENCODER
from operators.tables import set_column


class SentimentAnalyzer(Operator):
    """Label each row's text with its emotion (sadness, joy, love, anger, fear, surprise) as a chip.

    Three methods, all offline:

    * ``prototypes`` (default): the packaged MiniLM embeds the text and a few prototype
      sentences per emotion; the scores are a softmax over the mean cosine similarity
      to each emotion's prototypes, divided by ``temperature``. Edit ``prototypes`` to
      change the sentences or the labels themselves.
    * ``lexicon``: the NRC Emotion Lexicon (Mohammad & Turney 2013, from the ``nrclex``
      package, ``pip install tessera[lexicon]``). Each word is looked up (or its
      lemma, so "loved" finds "love"); the scores are each emotion's share of the
      matched emotion tags (a text without any has no evidence: null). NRC has joy,
      sadness, anger, fear and surprise but no *love*, so love scores 0 unless
      ``lexicon_additions`` tags words with it; NRC's trust, disgust, anticipation,
      positive and negative are ignored. Bag of words: negation ("not happy") is not
      understood. **The NRC lexicon's terms allow research use; commercial use
      needs a licence from the National Research Council Canada.**
    * ``classifier``: a local Hugging Face text-classification checkpoint folder
      (``model``), e.g. bhadresh-savani/distilbert-base-uncased-emotion as the seed
      used, through transformers' pipeline; its ``id2label`` names (lowercased) are the
      labels. Texts are truncated to the model's limit.

    Empty or null texts get a null label and null scores. ``emotion_scores`` is a
    struct with one float per label, so the whole distribution stays available next
    to the chip.

    Usage::

        SentimentAnalyzer({})(pa.table({"text": ["I can't stop crying since my dog died."]}))
        # emotion: ["sadness"], emotion_scores: [{sadness: 0.8, joy: 0.01, ...}]
    """

    name = "analyze.sentiment"
    aliases = ("analyze.emotion",)
    scope = "row"
    batch_size = 256

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        method: Literal["prototypes", "lexicon", "classifier"] = Field(
            "prototypes", description="prototypes: MiniLM similarity to example sentences per emotion; lexicon: NRC "
            "emotion words (research use only); classifier: a local Hugging Face text-classification checkpoint.")
        input_column: str = Field("text", description="Column whose emotion is labelled.")
        output_column: str = Field("emotion", description="Column that receives the top label (or null).")
        scores_column: str | None = Field("emotion_scores", description="Column that receives a struct with "
                                          "every label's score; null writes none.")
        model: str | None = Field(
            None, validate_default=True, description=f"prototypes: sentence-transformers encoder (default "
            f"{DEFAULT_ENCODER}); classifier (required): a local text-classification checkpoint folder; lexicon: "
            "unused.")
        prototypes: dict[str, list[str]] = Field(
            default_factory=lambda: {label: list(s) for label, s in DEFAULT_PROTOTYPES.items()},
            description="prototypes: example sentences per label; the keys are the labels.")
        temperature: float = Field(0.05, gt=0, description="prototypes: softmax temperature over cosine "
                                   "similarities; lower gives more peaked scores (the top label is unchanged).")
        lexicon_additions: dict[str, list[Literal[EMOTIONS]]] = Field(  # type: ignore[valid-type]
            default_factory=dict, description="lexicon: extra words and their emotions (e.g. {'adore': ['love']}); "
            "they replace the NRC entry of the same word.")
        device: str | None = Field(None, description="Torch device ('cpu', 'cuda') for prototypes and classifier.")
        encode_batch_size: int = Field(64, gt=0, le=4096, description="Texts per forward pass.")

        @field_validator("prototypes")
        @classmethod
        def _prototypes_are_usable(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
            if len(value) < 2:
                raise ValueError("give at least two labels, each with one or more prototype sentences")
            empty = [label for label, sentences in value.items()
                     if not label.strip() or not sentences or not all(s.strip() for s in sentences)]
            if empty:
                raise ValueError(f"labels {empty} need a non-empty name and non-empty prototype sentences")
            return value

        @field_validator("model")
        @classmethod
        def _model_fits_method(cls, value: str | None, info: ValidationInfo) -> str | None:
            method = info.data.get("method")
            if method == "classifier" and not value:
                raise ValueError("method 'classifier' needs model: a local text-classification checkpoint folder")
            if method == "lexicon" and value:
                raise ValueError("method 'lexicon' uses no model; remove params.model")
            return value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._scorer = None

    def reads(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        columns = {self.params.output_column: "chip"}
        if self.params.scores_column:
            columns[self.params.scores_column] = "data"
        return columns

    def setup(self) -> None:
        if self._scorer is not None:
            return
        from operators.analyze import _emotions

        p = self.params
        if p.method == "prototypes":
            from operators.models import load_sentence_transformer, resolve_model_path

            model = load_sentence_transformer(p.model or DEFAULT_ENCODER, device=p.device)
            key = {"model": str(resolve_model_path(p.model or DEFAULT_ENCODER)), "device": p.device}
            self._scorer = _emotions.PrototypeScorer(model, p.prototypes, p.temperature, p.encode_batch_size, key)
        elif p.method == "lexicon":
            self._scorer = _emotions.LexiconScorer(p.lexicon_additions)
        else:
            pipe = _emotions.load_classifier(p.model, device=p.device)
            self._scorer = _emotions.ClassifierScorer(pipe, p.encode_batch_size)

    def required_models(self) -> dict[str, str]:
        if self.params.method == "lexicon":
            return {}
        return {"params.model": self.params.model or DEFAULT_ENCODER}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        if self.params.method != "lexicon":
            from operators.models.fingerprint import weights_fingerprint

            identity["weights"] = weights_fingerprint(self.params.model or DEFAULT_ENCODER)
        return identity

    def transform(self, table: pa.Table) -> pa.Table:
        text = table.column(self.params.input_column)
        if not pa.types.is_string(text.type) and not pa.types.is_large_string(text.type):
            raise OperatorError(f"input_column '{self.params.input_column}' must hold text, not {text.type}",
                                op=self.name, step=self.step_id, field="params.input_column")
        # results repeat documents: score each distinct text once
        encoded = pc.dictionary_encode(pc.fill_null(text.combine_chunks(), ""))
        distinct = [value.strip() for value in encoded.dictionary.to_pylist()]
        present = [i for i, value in enumerate(distinct) if value]
        labels = self._scorer.labels
        scores = np.zeros((len(distinct), len(labels)))
        if present:
            scores[present] = self._scorer.score([distinct[i] for i in present])
        evidence = scores.sum(axis=1) > 0  # empty texts and texts without a lexicon word have none
        top = pa.array([labels[i] if ok else None for i, ok in zip(scores.argmax(axis=1), evidence)], pa.string())
        out = set_column(table, self.params.output_column, top.take(encoded.indices))
        if self.params.scores_column:
            fields = [pa.array(scores[:, i], pa.float64()) for i in range(len(labels))]
            struct = pa.StructArray.from_arrays(fields, names=labels, mask=pa.array(~evidence))
            out = set_column(out, self.params.scores_column, struct.take(encoded.indices))
        return out
