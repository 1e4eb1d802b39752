"""preprocess.stopwords: contract, and stopword removal in en/de/fr/it by row language."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.preprocess._languages import normalize_language
from operators.registry import create
from operators.testing import SAMPLE_SENTENCES, OperatorContract

SENTENCES = {lang: SAMPLE_SENTENCES[lang] for lang in ("en", "de", "fr", "it")}

# stopwords-iso lists (the default): function words go, content words and their punctuation stay.
EXPECTED_ISO = {
    "en": "honey bee social insect lives colonies produces honey nectar flowers.",
    "de": "Honigbiene staatenbildendes Insekt, Völkern lebt Nektar Blüten Honig herstellt.",
    "fr": "abeille domestique insecte social vit grandes colonies produit miel partir nectar fleurs.",
    "it": "ape domestica insetto sociale vive grandi colonie produce miele nettare fiori.",
}


def run(texts, languages=None, **params):
    columns = {"text": pa.array(texts, pa.string())}
    if languages is not None:
        columns["language"] = pa.array(languages, pa.string())
    return create("preprocess.stopwords", params)(pa.table(columns))


class TestStopwordsContract(OperatorContract):
    operator_name = "preprocess.stopwords"


@pytest.mark.parametrize("language", ["en", "de", "fr", "it"])
def test_removes_stopwords_and_keeps_content_words(language):
    out = run([SENTENCES[language]], [language])
    assert out.column("text").to_pylist() == [EXPECTED_ISO[language]]


def test_snowball_lists_are_shorter():
    texts = [SENTENCES["en"], SENTENCES["de"]]
    out = run(texts, ["en", "de"], stopword_list="snowball")
    assert out.column("text").to_pylist() == [
        "honey bee social insect lives large colonies produces honey nectar flowers.",
        "Honigbiene staatenbildendes Insekt, großen Völkern lebt Nektar Blüten Honig herstellt.",
    ]


def test_language_switches_per_row_in_one_batch():
    languages = ["it", "en", "fr", "de", "en", "it"]
    texts = [SENTENCES[lang] for lang in languages]
    out = run(texts, languages)
    assert out.column("text").to_pylist() == [EXPECTED_ISO[lang] for lang in languages]


def test_row_language_decides_the_list():
    # German text labelled English loses only what English lists (in); labelled German it loses more.
    out = run([SENTENCES["de"], SENTENCES["de"]], ["en", "de"])
    as_english, as_german = out.column("text").to_pylist()
    assert as_english.startswith("Die Honigbiene ist ein staatenbildendes Insekt, das großen")
    assert as_german == EXPECTED_ISO["de"]


@pytest.mark.parametrize("code, expected", [
    ("eng", "en"), ("ENG", "en"), ("English", "en"), ("en-US", "en"),
    ("deu", "de"), ("ger", "de"), ("German", "de"), ("de_AT", "de"),
    ("fra", "fr"), ("fre", "fr"), ("french", "fr"),
    ("ita", "it"), ("Italian", "it"), (" it ", "it"),
    ("ja", None), ("jpn", None), ("xx", None), ("", None), (None, None), (3, None),
])
def test_normalize_language(code, expected):
    assert normalize_language(code) == expected


def test_iso_639_2_and_3_codes_and_names_are_accepted():
    codes = ["eng", "ger", "fre", "ita", "deu", "fra", "English", "ITALIAN"]
    languages = ["en", "de", "fr", "it", "de", "fr", "en", "it"]
    out = run([SENTENCES[lang] for lang in languages], codes)
    assert out.column("text").to_pylist() == [EXPECTED_ISO[lang] for lang in languages]


def test_unsupported_languages_pass_through_unchanged():
    texts = ["これは日本語の文です。", "The  text   is kept, spacing and all.", "El perro y el gato."]
    out = run(texts, ["ja", "xx", "es"])
    assert out.column("text").to_pylist() == texts


def test_nulls_stay_null_and_null_language_uses_default():
    out = run([None, SENTENCES["de"], None, ""], [None, None, "fr", "en"], default_language="de")
    assert out.column("text").to_pylist() == [None, EXPECTED_ISO["de"], None, ""]


def test_without_language_column_uses_default_language():
    out = run([SENTENCES["fr"]], default_language="fra")
    assert out.column("text").to_pylist() == [EXPECTED_ISO["fr"]]
    # language_column=None ignores a language column that is there.
    out = run([SENTENCES["en"]], ["de"], language_column=None, default_language="en")
    assert out.column("text").to_pylist() == [EXPECTED_ISO["en"]]


def test_case_sensitive_keeps_capitalised_stopwords():
    out = run(["The Bee and the Flower"], ["en"], case_sensitive=True)
    assert out.column("text").to_pylist() == ["The Bee Flower"]
    out = run(["The Bee and the Flower"], ["en"])
    assert out.column("text").to_pylist() == ["Bee Flower"]


def test_extra_stopwords_and_keep_words():
    out = run(["The computer and the bee"], ["en"])
    assert out.column("text").to_pylist() == ["bee"]  # stopwords-iso lists 'computer'
    out = run(["The computer and the bee"], ["en"], keep_words=["Computer"], extra_stopwords=["Bee"])
    assert out.column("text").to_pylist() == ["computer"]


def test_curly_apostrophes_and_elisions():
    out = run(["Don’t panic", "jusqu’à l’océan", "nell’acqua fredda"], ["en", "fr", "it"])
    assert out.column("text").to_pylist() == ["panic", "océan", "acqua fredda"]


def test_output_column_leaves_input_alone():
    op = create("preprocess.stopwords", {"output_column": "clean"})
    table = pa.table({"text": [SENTENCES["en"]]})
    out = op(table)
    assert op.produces() == {"clean": "text"}
    assert out.column("text").to_pylist() == [SENTENCES["en"]]
    assert out.column("clean").to_pylist() == [EXPECTED_ISO["en"]]


def test_reads_names_the_language_column_but_does_not_require_it():
    op = create("preprocess.stopwords", {"language_column": "lang"})
    assert op.reads() == ["text", "lang"]
    assert op.requires() == ["text"]
    assert create("preprocess.stopwords", {"language_column": None}).reads() == ["text"]


def test_large_batch_with_mixed_languages_is_vectorised():
    languages = ["en", "de", "fr", "it", "ja"] * 400
    texts = [SENTENCES.get(lang, "日本語") for lang in languages]
    out = run(texts, languages).column("text").to_pylist()
    assert out == [EXPECTED_ISO.get(lang, "日本語") for lang in languages]


def test_text_and_language_column_types():
    text = pa.array([SENTENCES["de"], None], pa.string())
    languages = pa.array(["de", "en"]).dictionary_encode()
    out = create("preprocess.stopwords")(pa.table({"text": text.cast(pa.large_string()), "language": languages}))
    assert out.schema.field("text").type == pa.large_string()
    assert out.column("text").to_pylist() == [EXPECTED_ISO["de"], None]
    out = create("preprocess.stopwords")(pa.table({"text": text.dictionary_encode(), "language": languages}))
    assert out.column("text").to_pylist() == [EXPECTED_ISO["de"], None]


def test_non_text_column_is_an_error_naming_the_step():
    op = create("preprocess.stopwords", step_id="clean")
    with pytest.raises(OperatorError) as err:
        op(pa.table({"text": [1, 2]}))
    assert err.value.step == "clean" and "not text" in err.value.message


@pytest.mark.parametrize("op", ["preprocess.stopwords", "preprocess.stem", "preprocess.punctuation"])
def test_a_default_language_these_steps_do_not_process_is_refused(op):
    """``default_language: es`` (or ``xx``) was taken, and every row without a language passed through unchanged."""
    from operators.errors import ParamsError

    with pytest.raises(ParamsError, match="'es' is none of the languages these steps process"):
        create(op, {"default_language": "es"})
    assert create(op, {"default_language": "de-DE"}).params.default_language == "de-DE"
