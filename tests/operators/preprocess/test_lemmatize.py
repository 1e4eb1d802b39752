"""preprocess.lemmatize: contract, and simplemma lemmas in en/de/fr/it by row language."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.registry import create
from operators.testing import OperatorContract

CASES = {
    "en": ("The children were running to the houses of the mice.",
           "the child be run to the house of the mouse."),
    "de": ("Die Kinder gingen in die Häuser und sahen die Bäume.",
           "der Kind gehen in der Haus und sehen der Baum."),
    "fr": ("Les chevaux étaient plus grands que les enfants.",
           "le cheval être plus grand que le enfant."),
    "it": ("I cani erano andati nelle città.",
           "il cane essere andare nella città."),
}


def run(texts, languages=None, **params):
    columns = {"text": pa.array(texts, pa.string())}
    if languages is not None:
        columns["language"] = pa.array(languages, pa.string())
    return create("preprocess.lemmatize", params)(pa.table(columns))


class TestLemmatizeContract(OperatorContract):
    operator_name = "preprocess.lemmatize"


@pytest.mark.parametrize("language", ["en", "de", "fr", "it"])
def test_lemmas_of_known_words(language):
    text, expected = CASES[language]
    assert run([text], [language]).column("text").to_pylist() == [expected]


def test_lowercase():
    out = run([CASES["de"][0]], ["de"], lowercase=True).column("text").to_pylist()
    assert out == ["der kind gehen in der haus und sehen der baum."]


def test_language_switches_per_row_in_one_batch():
    languages = ["it", "de", "en", "fr", "de"]
    out = run([CASES[lang][0] for lang in languages], languages).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]
    # The same word is looked up in each row's own dictionary.
    out = run(["sono", "sono"], ["it", "en"]).column("text").to_pylist()
    assert out == ["essere", "sono"]
    out = run(["Häuser", "Häuser"], ["de", "en"]).column("text").to_pylist()
    assert out == ["Haus", "Häuser"]


def test_iso_639_2_and_3_codes_are_accepted():
    codes = ["eng", "ger", "deu", "fre", "fra", "ita", "German"]
    languages = ["en", "de", "de", "fr", "fr", "it", "de"]
    out = run([CASES[lang][0] for lang in languages], codes).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]


def test_unknown_words_and_punctuation_are_kept():
    out = run(["Xyzzqv, (Blorfs)!"], ["en"]).column("text").to_pylist()
    assert out == ["Xyzzqv, (Blorfs)!"]


def test_elided_clitics_are_kept_and_the_word_lemmatised():
    out = run(["L'homme mangeait des pommes.", "dell'anno"], ["fr", "it"]).column("text").to_pylist()
    assert out == ["L'homme manger un pomme.", "dell'anno"]


def test_unsupported_languages_pass_through_unchanged():
    texts = ["Los niños estaban corriendo.", "子供たちは走っていた", "The  children"]
    assert run(texts, ["es", "ja", "xx"]).column("text").to_pylist() == texts


def test_nulls_stay_null():
    out = run([None, "chevaux", None], [None, None, "it"], default_language="fra").column("text").to_pylist()
    assert out == [None, "cheval", None]
