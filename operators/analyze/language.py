"""Language detection chip (lingua)."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.tables import set_column, text_column

DEFAULT_CANDIDATES = ["en", "de", "fr", "it", "es", "nl", "pt"]

_detectors: dict[tuple, Any] = {}
_detectors_lock = threading.Lock()


def get_detector(languages: tuple[str, ...], low_accuracy: bool):
    """The lingua detector for these ISO 639-1 codes, built once per process (thread-safe).

    Its language models are loaded eagerly, so the first detection is not the slow one.
    """
    key = (tuple(sorted(languages)), low_accuracy)
    with _detectors_lock:
        detector = _detectors.get(key)
        if detector is None:
            from lingua import IsoCode639_1, LanguageDetectorBuilder

            builder = LanguageDetectorBuilder.from_iso_codes_639_1(*[getattr(IsoCode639_1, c.upper()) for c in key[0]])
            if low_accuracy:
                builder = builder.with_low_accuracy_mode()
            detector = _detectors[key] = builder.with_preloaded_language_models().build()
    return detector


class LanguageDetector(Operator):
    """Detect the language of a text column and show it as a chip (ISO 639-1 code, e.g. "de").

    Uses lingua restricted to a list of candidate languages; texts it cannot decide
    (empty, digits only, or less confident than ``min_confidence``) get null. The
    detector is built once per process; each distinct text of a batch is detected
    once, in parallel. The ``language`` column it writes is what the preprocess
    operators read.

    Usage::

        LanguageDetector({"confidence_column": "language_confidence"})(pa.table({
            "text": ["The house is old.", "Das Haus ist alt.", "La maison est vieille."]}))
        # language: ["en", "de", "fr"]
    """

    name = "analyze.language"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        input_column: str = Field("text", description="Column whose language is detected.")
        output_column: str = Field("language", description="Column that receives the ISO 639-1 code (or null).")
        confidence_column: str | None = Field(
            None, description="Column that receives the detector's confidence (0-1) in that language; None: none."
        )
        languages: list[str] = Field(
            default_factory=lambda: list(DEFAULT_CANDIDATES),
            min_length=2,
            description="Candidate languages as ISO 639-1 codes; fewer candidates are faster and more accurate.",
        )
        min_confidence: float = Field(
            0.0, ge=0, le=1, description="Below this confidence the language is null (0 keeps every decision)."
        )
        max_chars: int = Field(
            1000, gt=0, description="Only the first max_chars characters of a text are looked at (speed)."
        )
        low_accuracy: bool = Field(
            False, description="lingua's low-accuracy mode: faster and lighter, weaker on short texts."
        )

        @field_validator("languages")
        @classmethod
        def _known_languages(cls, value: list[str]) -> list[str]:
            from lingua import IsoCode639_1

            codes = [code.strip().lower() for code in value]
            unknown = [code for code in codes if len(code) != 2 or not hasattr(IsoCode639_1, code.upper())]
            if unknown:
                raise ValueError(f"unknown ISO 639-1 code(s) {unknown}; use two-letter codes such as 'en', 'de'")
            return list(dict.fromkeys(codes))

    def reads(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        columns = {self.params.output_column: "chip"}
        if self.params.confidence_column:
            columns[self.params.confidence_column] = "data"
        return columns

    def setup(self) -> None:
        self._detector = get_detector(tuple(self.params.languages), self.params.low_accuracy)

    def transform(self, table: pa.Table) -> pa.Table:
        texts = text_column(table, self.params.input_column, op=self.name, step=self.step_id)
        texts = pc.utf8_slice_codeunits(texts, 0, self.params.max_chars)
        encoded = pc.dictionary_encode(texts)  # results repeat documents: detect each text once
        distinct = encoded.dictionary.to_pylist()
        codes, confidences = self._detect(distinct)
        language = pa.array(codes, pa.string()).take(encoded.indices)
        out = set_column(table, self.params.output_column, language)
        if self.params.confidence_column:
            confidence = pa.array(confidences, pa.float64()).take(encoded.indices)
            out = set_column(out, self.params.confidence_column, confidence)
        return out

    def _detect(self, texts: list[str]) -> tuple[list[str | None], list[float | None]]:
        if not texts:
            return [], []
        if not self.params.confidence_column and self.params.min_confidence == 0:
            found = self._detector.detect_languages_in_parallel_of(texts)
            return [_code(lang) for lang in found], [None] * len(texts)
        codes, confidences = [], []
        for values in self._detector.compute_language_confidence_values_in_parallel(texts):
            best = values[0] if values else None
            if best is None or best.value <= 0 or best.value < self.params.min_confidence:
                codes.append(None)
                confidences.append(None)
            else:
                codes.append(_code(best.language))
                confidences.append(float(best.value))
        return codes, confidences


def _code(language) -> str | None:
    return None if language is None else language.iso_code_639_1.name.lower()
