"""preprocess.stem: contract, and Snowball stems in en/de/fr/it by row language."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.registry import create
from operators.testing import OperatorContract

CASES = {
    "en": ("The connected networks were running, (quickly)!", "the connect network were run, (quick)!"),
    "de": ("Die Kinder gingen in die Häuser des alten Hauses.", "die kind ging in die haus des alt haus."),
    "fr": ("Il parlait continuellement de ses voyages.", "il parl continuel de se voyag."),
    "it": ("Le città italiane erano abbandonate.", "le citt italian eran abbandon."),
}


def run(texts, languages=None, **params):
    columns = {"text": pa.array(texts, pa.string())}
    if languages is not None:
        columns["language"] = pa.array(languages, pa.string())
    return create("preprocess.stem", params)(pa.table(columns))


class TestStemContract(OperatorContract):
    operator_name = "preprocess.stem"


@pytest.mark.parametrize("language", ["en", "de", "fr", "it"])
def test_snowball_stems(language):
    text, expected = CASES[language]
    assert run([text], [language]).column("text").to_pylist() == [expected]


def test_inflected_forms_share_a_stem():
    out = run(["Haus Häuser Hauses Häusern", "continuellement continuel", "abbandonata abbandonare"],
              ["de", "fr", "it"]).column("text").to_pylist()
    assert out == ["haus haus haus haus", "continuel continuel", "abbandon abbandon"]


def test_language_switches_per_row_in_one_batch():
    languages = ["fr", "it", "en", "de", "fr"]
    out = run([CASES[lang][0] for lang in languages], languages).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]


def test_row_language_changes_the_stem():
    # The same words stem by each row's own language.
    out = run(["Häuser natürlich"] * 4 + ["abitazioni"] * 2, ["en", "de", "fr", "it", "fr", "it"])
    assert out.column("text").to_pylist() == [
        "häuser natürlich", "haus natur", "häus natürlich", "häuser natürlic", "abitazion", "abit",
    ]


def test_iso_639_2_and_3_codes_are_accepted():
    codes = ["eng", "ger", "deu", "fre", "fra", "ita", "French"]
    languages = ["en", "de", "de", "fr", "fr", "it", "fr"]
    out = run([CASES[lang][0] for lang in languages], codes).column("text").to_pylist()
    assert out == [CASES[lang][1] for lang in languages]


def test_unsupported_languages_pass_through_unchanged():
    texts = ["Los niños estaban corriendo.", "走っている子供たち", "Running  Houses"]
    assert run(texts, ["es", "ja", "xx"]).column("text").to_pylist() == texts


def test_nulls_stay_null():
    out = run([None, "Häuser", None], [None, None, "de"], default_language="german").column("text").to_pylist()
    assert out == [None, "haus", None]


def test_empty_and_punctuation_only_texts():
    assert run(["", "   ", "— !"], ["en", "en", "en"]).column("text").to_pylist() == ["", "", "— !"]


_POOL_TEXTS = [CASES[lang][0] for lang in CASES] + ["", "  Häuser,  houses!  ", None, "— l'homme —"]
_POOL_LANGS = ["en", "de", "fr", "it", "deu", "FRE", "xx", "ja", None]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_POOL_TEXTS), st.sampled_from(_POOL_LANGS)), max_size=25))
def test_batch_equals_row_by_row(rows):
    texts = [text for text, _ in rows]
    languages = [lang for _, lang in rows]
    op = create("preprocess.stem", {"default_language": "it"})
    batch = op(pa.table({"text": pa.array(texts, pa.string()), "language": pa.array(languages, pa.string())}))
    one_by_one = [
        op(pa.table({"text": pa.array([text], pa.string()), "language": pa.array([lang], pa.string())}))
        .column("text")[0].as_py()
        for text, lang in rows
    ]
    assert batch.column("text").to_pylist() == one_by_one
