"""preprocess.punctuation: contract, contractions/elisions, Unicode and punctuation by row language."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.registry import create
from operators.testing import OperatorContract, sample_results

CASES = {
    "en": ("It's the bees' work: they don't rest, and John's hive won't either!",
           "It is the bees work they do not rest and John hive will not either"),
    "de": ("Die Honigbiene (Apis mellifera) lebt in Völkern – „staatenbildend“ – mit bis zu 50.000 Tieren.",
           "Die Honigbiene Apis mellifera lebt in Völkern staatenbildend mit bis zu 50.000 Tieren"),
    "fr": ("L'abeille n'est pas qu'un insecte : c'est l'emblème d'une région, jusqu'à Paris.",
           "L abeille ne est pas que un insecte ce est l emblème de une région jusque à Paris"),
    "it": ("L'ape c'è da sempre: un'ape nell'alveare è dell'anno, quest'estate.",
           "L ape ci è da sempre una ape nell alveare è dell anno quest estate"),
}


def run(texts, languages=None, **params):
    columns = {"text": pa.array(texts, pa.string())}
    if languages is not None:
        columns["language"] = pa.array(languages, pa.string())
    return create("preprocess.punctuation", params)(pa.table(columns))


class TestPunctuationContract(OperatorContract):
    operator_name = "preprocess.punctuation"


class TestPunctuationOnQueriesContract(OperatorContract):
    operator_name = "preprocess.punctuation"

    def make_operator(self, **params):
        return create(self.operator_name, {"apply_to_query": True, **params})


@pytest.mark.parametrize("language", ["en", "de", "fr", "it"])
def test_contractions_elisions_and_punctuation(language):
    text, expected = CASES[language]
    assert run([text], [language]).column("text").to_pylist() == [expected]


def test_language_switches_per_row_in_one_batch():
    languages = ["fr", "en", "it", "de", "en"]
    out = run([CASES[lang][0] for lang in languages], languages).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]
    # English contractions only in English rows, elisions only in French/Italian ones.
    out = run(["don't d'accord", "don't d'accord", "don't d'accord"], ["en", "fr", "de"]).column("text").to_pylist()
    assert out == ["do not d accord", "don t de accord", "don t d accord"]


def test_curly_apostrophes_and_case():
    out = run(["Qu’il vienne, D’ACCORD ?", "We’re sure", "C’è l’acqua"], ["fr", "en", "it"]).column("text").to_pylist()
    assert out == ["Que il vienne DE ACCORD", "We are sure", "Ci è l acqua"]


def test_french_s_before_il_is_si():
    out = run(["s'il pleut, il s'abrite"], ["fr"]).column("text").to_pylist()
    assert out == ["si il pleut il se abrite"]


def test_unicode_compatibility_forms_are_decomposed_and_recomposed():
    out = run(["ﬁnancial ＡＢＣ１２３ x² cafe\u0301 Œuvre"], ["en"]).column("text").to_pylist()
    assert out == ["financial ABC123 x2 café Œuvre"]  # NFKD, then NFC: é is one code point again
    assert len(out[0].split()[3]) == 4


def test_strip_accents():
    out = run([CASES["de"][0], CASES["fr"][0]], ["de", "fr"], strip_accents=True).column("text").to_pylist()
    assert out == [
        "Die Honigbiene Apis mellifera lebt in Volkern staatenbildend mit bis zu 50.000 Tieren",
        "L abeille ne est pas que un insecte ce est l embleme de une region jusque a Paris",
    ]


def test_numbers_keep_their_separators_and_line_breaks_stay():
    out = run(["Pi is 3.14, about 1,000 km/h.\n\n  Next — line;  here"], ["en"]).column("text").to_pylist()
    assert out == ["Pi is 3.14 about 1,000 km h\n\nNext line here"]


def test_expand_contractions_off():
    out = run(["don't", "qu'il"], ["en", "fr"], expand_contractions=False).column("text").to_pylist()
    assert out == ["don t", "qu il"]


def test_iso_639_2_and_3_codes_are_accepted():
    codes = ["eng", "ger", "fre", "ita", "deu", "fra", "english"]
    languages = ["en", "de", "fr", "it", "de", "fr", "en"]
    out = run([CASES[lang][0] for lang in languages], codes).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]


def test_unsupported_languages_pass_through_unchanged():
    texts = ["¡Hola! ¿Qué tal?", "こんにちは、世界。", "don't  stop!"]
    assert run(texts, ["es", "ja", "xx"]).column("text").to_pylist() == texts


def test_nulls_stay_null():
    out = run([None, "C'est ça.", None], [None, None, "en"], default_language="fr").column("text").to_pylist()
    assert out == [None, "Ce est ça", None]


def test_apply_to_query_cleans_each_query():
    table = sample_results(n_queries=2, per_query=2)
    table = table.set_column(table.column_names.index("query"), "query",
                             pa.array(["What's a bee?", "What's a bee?", "Who wrote 'Carmen'?", None]))
    op = create("preprocess.punctuation", {"apply_to_query": True})
    out = op(table)
    assert out.column("query").to_pylist() == ["What is a bee", "What is a bee", "Who wrote Carmen", None]
    assert "query" in op.reads() and "query" in op.requires() and op.produces()["query"] == "data"
    # Without apply_to_query the query is left alone.
    out = create("preprocess.punctuation")(table)
    assert out.column("query").to_pylist() == table.column("query").to_pylist()
