"""analyze.language: contract, detection on real sentences, and feeding the preprocess operators."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.analyze.language import get_detector
from operators.errors import ParamsError
from operators.registry import create
from operators.testing import SAMPLE_SENTENCES, OperatorContract

SENTENCES = SAMPLE_SENTENCES
SHORT = {
    "Berlin ist die Hauptstadt Deutschlands.": "de",
    "Paris est la capitale de la France.": "fr",
    "Roma è la capitale d'Italia.": "it",
    "London is the capital of England.": "en",
}


def detect(texts, **params):
    return create("analyze.language", params)(pa.table({"text": pa.array(texts, pa.string())}))


class TestLanguageContract(OperatorContract):
    operator_name = "analyze.language"

    def test_sample_documents_are_english(self):
        out = self._run(self.make_input())
        assert set(out.column("language").to_pylist()) == {"en"}


class TestLanguageWithConfidenceContract(OperatorContract):
    operator_name = "analyze.language"

    def make_operator(self, **params):
        return create(self.operator_name, {"confidence_column": "language_confidence", **params})


def test_detects_each_language():
    out = detect(list(SENTENCES.values()) + list(SHORT))
    assert out.column("language").to_pylist() == list(SENTENCES) + list(SHORT.values())


def test_undecidable_and_null_texts_get_null():
    out = detect(["", "12345 !!!", None, SENTENCES["de"]], confidence_column="conf")
    assert out.column("language").to_pylist() == [None, None, None, "de"]
    assert out.column("conf").to_pylist()[:3] == [None, None, None]


def test_confidence_column():
    out = detect([SENTENCES["de"], SENTENCES["it"], "Paris est la capitale de la France."], confidence_column="conf")
    conf = out.column("conf").to_pylist()
    assert conf[0] > 0.99 and conf[1] > 0.9 and 0 < conf[2] < 0.9
    assert out.schema.field("conf").type == pa.float64()


def test_min_confidence_turns_unsure_decisions_null():
    out = detect([SENTENCES["de"], "Paris est la capitale de la France."], min_confidence=0.9)
    assert out.column("language").to_pylist() == ["de", None]


def test_candidates_restrict_the_answer():
    out = detect([SENTENCES["fr"], SENTENCES["de"]], languages=["en", "de"])
    assert out.column("language").to_pylist() == ["en", "de"]


def test_repeated_texts_are_detected_once_and_spread_back():
    texts = [SENTENCES["fr"], SENTENCES["en"], SENTENCES["fr"], None, SENTENCES["en"]] * 50
    out = detect(texts).column("language").to_pylist()
    assert out == ["fr", "en", "fr", None, "en"] * 50


def test_invalid_candidates_are_rejected_at_construction():
    with pytest.raises(ParamsError) as err:
        create("analyze.language", {"languages": ["en", "xx"]})
    assert err.value.field == "params.languages" and "xx" in err.value.message
    with pytest.raises(ParamsError):
        create("analyze.language", {"languages": ["en"]})


def test_detector_is_built_once_per_process():
    a = create("analyze.language")
    b = create("analyze.language", {"languages": ["pt", "nl", "es", "it", "fr", "de", "en"]})
    a.setup()
    b.setup()
    assert a._detector is b._detector is get_detector(("en", "de", "fr", "it", "es", "nl", "pt"), False)


def test_detected_language_drives_preprocessing():
    texts = [SENTENCES["de"], SENTENCES["fr"], SENTENCES["es"], SENTENCES["it"]]
    table = create("analyze.language")(pa.table({"text": texts}))
    out = create("preprocess.stopwords")(table)
    assert out.column("text").to_pylist() == [
        "Honigbiene staatenbildendes Insekt, Völkern lebt Nektar Blüten Honig herstellt.",
        "abeille domestique insecte social vit grandes colonies produit miel partir nectar fleurs.",
        SENTENCES["es"],  # Spanish is detected but not supported: unchanged
        "ape domestica insetto sociale vive grandi colonie produce miele nettare fiori.",
    ]
