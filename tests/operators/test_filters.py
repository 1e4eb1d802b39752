"""The metadata filter model: validation, compilation per column type, null semantics."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pydantic import ValidationError

from operators.filters import FilterError, MetadataFilter, filter_table

DAYS = [dt.date(2018, 12, 31), dt.date(2019, 1, 1), dt.date(2019, 5, 17), dt.date(2019, 12, 31),
        dt.date(2020, 2, 29), None]


def docs() -> pa.Table:
    return pa.table({
        "docno": ["d0", "d1", "d2", "d3", "d4", "d5"],
        "year": pa.array([2018, 2019, 2019, 2019, 2020, None], pa.int64()),
        "day": pa.array(DAYS, pa.date32()),
        "stamp": pa.array([None if d is None else dt.datetime(d.year, d.month, d.day, 12) for d in DAYS],
                          pa.timestamp("us", tz="UTC")),
        "iso": [None if d is None else f"{d.isoformat()}T08:30:00" for d in DAYS],
        "country": ["FR", "de", "JP", "US", "FR", None],
        "region": ["Europe", "Europe", "Asia", "Americas", "Europe", None],
        "lang": ["en", "de", "ja", "en", "fr", "en"],
        "score": [0.1, 0.5, 0.9, 0.3, 0.7, 0.2],
    })


def matching(spec: dict) -> list[str]:
    return filter_table(docs(), MetadataFilter.model_validate(spec)).column("docno").to_pylist()


def test_comparisons_membership_and_ranges():
    assert matching({"field": "lang", "eq": "en"}) == ["d0", "d3", "d5"]
    assert matching({"field": "lang", "ne": "en"}) == ["d1", "d2", "d4"]
    assert matching({"field": "lang", "in": ["de", "fr"]}) == ["d1", "d4"]
    assert matching({"field": "lang", "not_in": ["en"]}) == ["d1", "d2", "d4"]
    assert matching({"field": "score", "gte": 0.3, "lt": 0.9}) == ["d1", "d3", "d4"]
    assert matching({"field": "year", "gt": 2018, "lte": 2019}) == ["d1", "d2", "d3"]


@pytest.mark.parametrize("column", ["day", "stamp", "iso", "year"])
def test_year_and_date_ranges_on_every_kind_of_date_column(column):
    assert matching({"field": column, "year": 2019}) == ["d1", "d2", "d3"]
    # a year column only knows years: 2019 and 2020 overlap the range
    expected = ["d1", "d2", "d3", "d4"] if column == "year" else ["d2", "d3"]
    assert matching({"field": column, "date_from": "2019-02-01", "date_to": "2020-01-31"}) == expected


def test_a_list_under_a_comparison_is_named_as_that_not_as_the_first_type_tried():
    with pytest.raises(ValidationError) as err:
        MetadataFilter.model_validate({"field": "yr", "eq": [1, 2]})
    assert "'eq' takes one value (a number, text, date or true/false), not a list; for several values write in: " \
        "[1, 2]" in str(err.value) and "bool" not in str(err.value)
    with pytest.raises(ValidationError, match="'ne' takes one value .* write not_in: \\['x'\\]"):
        MetadataFilter.model_validate({"field": "yr", "ne": ["x"]})
    with pytest.raises(ValidationError, match="'gte' takes one value .*, not a mapping"):
        MetadataFilter.model_validate({"field": "yr", "gte": {"a": 1}})


def test_a_text_column_of_plain_years_and_months_matches_the_periods_it_names():
    """analyze.dimensions writes a year as "2021", and JSONL's 2021 beside "2021" makes a text column: as text,
    "2021" sorted before "2021-01-01", so {year: 2021} and date_from skipped every plain year."""
    table = pa.table({"docno": ["y", "d", "old", "new", "m", "t", "none"],
                      "when": ["2021", "2021-05-03", "2020", "2022", "2021-05", "2021-12-31T10:00:00", None]})

    def kept(spec: dict) -> list[str]:
        return filter_table(table, MetadataFilter.model_validate({"field": "when", **spec})).column("docno").to_pylist()

    assert kept({"year": 2021}) == ["y", "d", "m", "t"]
    assert kept({"date_from": "2021-06-01"}) == ["y", "new", "t"]  # the year 2021 overlaps; May 2021 ended before
    assert kept({"date_to": "2021-04-30"}) == ["y", "old"]
    assert kept({"date_from": "2021-05-04", "date_to": "2021-05-10"}) == ["y", "m"]


@pytest.mark.parametrize("column", ["day", "stamp", "iso"])
def test_months(column):
    assert matching({"field": column, "year": 2019, "month": 5}) == ["d2"]
    assert matching({"field": column, "month": 12}) == ["d0", "d3"]  # December of any year
    assert matching({"field": column, "year": 2020, "month": 2}) == ["d4"]  # leap day included


def test_spatial_is_case_insensitive_and_takes_lists():
    assert matching({"country": "fr"}) == ["d0", "d4"]
    assert matching({"country": ["DE", "jp"]}) == ["d1", "d2"]
    assert matching({"region": "europe", "country": "FR"}) == ["d0", "d4"]


def test_boolean_combinations_and_nulls():
    assert matching({"any": [{"country": "JP"}, {"field": "year", "eq": 2020}]}) == ["d2", "d4"]
    assert matching({"all": [{"region": "Europe"}, {"field": "lang", "ne": "fr"}]}) == ["d0", "d1"]
    # NOT as in SQL: d5 (null country) matches neither {country: FR} nor its negation
    assert matching({"not": {"country": "FR"}}) == ["d1", "d2", "d3"]
    assert matching({"field": "year", "not_in": [2019]}) == ["d0", "d4"]


def test_validation_names_what_is_wrong():
    # a condition without its field said "'year' need 'field': the column they apply to" (and "'gte, lt' need ...")
    for bad, words in (({"eq": 1}, r"the condition 'eq' needs 'field', the column it applies to: \{field: COLUMN, "),
                       ({"field": "year"}, "no condition"), ({}, "empty filter"),
                       ({"field": "day", "month": 13}, "less than or equal"),
                       ({"field": "d", "date_from": "2020-01-02", "date_to": "2020-01-01"}, "after"),
                       ({"any": []}, "at least one"),
                       # a misspelt key: it was "Extra inputs", or {fild: year} advised {field: fild, eq: 'year'}
                       ({"field": "x", "eqq": 1}, r"unknown key 'eqq'; did you mean 'eq'\? \(keys: all, any, "),
                       ({"fild": "year", "eq": 1}, r"unknown key 'fild'; did you mean 'field'\?"),
                       ({"contry": "FR"}, r"unknown key 'contry'; did you mean 'country'\?"),
                       ({"title": "Gothic"}, r"unknown key 'title': .* as field, e.g. \{field: title, eq: 'Gothic'\}"),
                       ({"year": 1999}, "the condition 'year' needs 'field', the column it applies to"),
                       ({"gte": 1, "lt": 3}, "the conditions 'gte', 'lt' need 'field', the column they apply to: "
                        r"\{field: COLUMN, gte: \.\.\., lt: \.\.\.\}")):
        with pytest.raises(ValidationError, match=words):
            MetadataFilter.model_validate(bad)


@pytest.mark.parametrize("bad, said", [
    # a comparison with null was refused as "'field: lang' has no condition", though the author gave one
    ({"field": "lang", "eq": None}, r"'eq: null' is no condition .*; for the rows where lang has no value write "
     r"\{field: lang, missing: true\}"),
    ({"field": "lang", "ne": None}, r"where lang has a value write \{field: lang, missing: false\}"),
    ({"field": "lang", "gte": None}, r"'gte: null' is no condition .*give it a value, or write \{field: lang, "),
    # an empty list matched no row (in) or every row with a value (not_in) without a word, as all: [] is refused
    ({"field": "lang", "in": []}, r"'in' needs at least one value \(an empty list matches no row\)"),
    ({"field": "lang", "not_in": []}, r"'not_in' needs at least one value \(an empty list excludes nothing"),
])
def test_a_null_comparison_or_an_empty_list_is_refused_saying_what_to_write(bad, said):
    with pytest.raises(ValidationError, match=said):
        MetadataFilter.model_validate(bad)
    assert matching({"field": "lang", "eq": None, "in": ["de"]}) == ["d1"]  # beside a condition, null is unset


def test_unknown_column_and_unfit_values_are_filter_errors():
    with pytest.raises(FilterError) as err:
        matching({"field": "yeer", "eq": 2019})
    assert "yeer" in err.value.message and "year" in err.value.message and err.value.field == "params.filter"
    with pytest.raises(FilterError, match=r"\['LANG'\] not found \('LANG': did you mean 'lang'\?\); available"):
        matching({"field": "LANG", "eq": "en"})  # a column name differing in case
    with pytest.raises(FilterError, match=r"\('lang.code': a filter reads whole columns, not fields inside one; 'lang' "
                       r"is string\)"):  # a JSONL record's object is a column of its JSON text
        matching({"field": "lang.code", "eq": "en"})
    with pytest.raises(FilterError, match="holds years"):
        matching({"field": "year", "month": 3})
    with pytest.raises(FilterError, match="does not fit"):
        matching({"field": "year", "eq": "not a year"})
    with pytest.raises(FilterError, match="temporal filters need"):
        matching({"field": "score", "year": 2019})


def test_numbers_compare_as_numbers_whatever_the_column_type():
    """A fraction on an integer column is rounded the way that keeps the comparison (no year equals 2019.5); an
    integer too large for int64 compares as a double on a column of doubles; a value beyond the column's type (but
    in an Arrow type) decides the comparison alone."""
    assert matching({"field": "year", "gte": 2018.5}) == ["d1", "d2", "d3", "d4"]
    assert matching({"field": "year", "gt": 2019.5, "lte": 2020.5}) == ["d4"]
    assert matching({"field": "year", "lt": 2019.5}) == ["d0", "d1", "d2", "d3"]
    assert matching({"field": "year", "eq": 2019.0}) == ["d1", "d2", "d3"]
    assert matching({"field": "year", "eq": 2019.5}) == []
    assert matching({"field": "year", "ne": 2019.5}) == ["d0", "d1", "d2", "d3", "d4"]  # d5's year is null
    assert matching({"field": "year", "in": [2019.5, 2020.0]}) == ["d4"]
    assert matching({"field": "year", "not_in": [2019.5, 2018]}) == ["d1", "d2", "d3", "d4"]
    assert matching({"field": "year", "eq": 2 ** 63}) == [] and matching({"field": "year", "gte": -1e30}) == \
        ["d0", "d1", "d2", "d3", "d4"]
    assert matching({"field": "score", "lt": 10 ** 30}) == ["d0", "d1", "d2", "d3", "d4", "d5"]
    assert matching({"field": "score", "eq": 10 ** 30}) == []
    assert matching({"field": "score", "in": [0.5, -10 ** 30]}) == ["d1"]
    assert matching({"field": "score", "not_in": [0.5, 10 ** 30]}) == ["d0", "d2", "d3", "d4", "d5"]


@pytest.mark.parametrize("spec, says", [
    ({"field": "year", "eq": 10 ** 30}, "filter {field: year, eq: 1000000000000000000000000000000}: value "
     "1000000000000000000000000000000 does not fit column 'year' of type int64 (an integer; beyond what any Arrow "
     "integer type holds"),
    ({"field": "year", "in": [2019, -10 ** 30]}, "filter {field: year, in: [2019, "
     "-1000000000000000000000000000000]}: value -1000000000000000000000000000000 does not fit column 'year'"),
    ({"field": "score", "gte": 10 ** 400}, "does not fit column 'score' of type double (an integer; beyond the range "
     "of a double)"),
    ({"field": "year", "eq": True}, "filter {field: year, eq: true}: value true does not fit column 'year' of type "
     "int64 (a boolean; the column holds numbers)"),
    ({"field": "score", "in": [0.5, False]}, "value false does not fit column 'score' of type double (a boolean"),
    ({"field": "year", "in": [2019, "soon"]}, "filter {field: year, in: [2019, 'soon']}: value 'soon' does not fit "
     "column 'year' of type int64 (text; "),
    # a number for a column of text would compare as text: gt 5 keeps 'en' and would drop '10'
    ({"field": "lang", "gt": 5}, "filter {field: lang, gt: 5}: value 5 does not fit column 'lang' of type string (an "
     "integer; the column holds text, compared character by character, not as numbers ('10' sorts before '9'); to "
     "compare as text, quote the value: '5')"),
    ({"field": "lang", "eq": 0.5}, "value 0.5 does not fit column 'lang' of type string (a number; the column holds "
     "text"),
    ({"field": "lang", "not_in": ["en", 10 ** 30]}, "value 1000000000000000000000000000000 does not fit column "
     "'lang' of type string (an integer; the column holds text"),
    ({"field": "raw", "lte": 3}, "value 3 does not fit column 'raw' of type binary (an integer; the column holds "
     "bytes"),
    ({"field": "code", "in": [5]}, "value 5 does not fit column 'code' of type dictionary<values=string"),
    # a boolean for a column of text would be the text 'true': eq true on 'True' or 'yes' silently matched nothing
    ({"field": "lang", "eq": True}, "filter {field: lang, eq: true}: value true does not fit column 'lang' of type "
     "string (a boolean; the column holds text, not true or false: true would match only the text 'true', not "
     "'True', 'yes' or '1'; quote the value, spelled as the column spells it, to compare it as text"),
    ({"field": "code", "in": ["5", False]}, "value false does not fit column 'code' of type dictionary<values=string"
     ", indices=int32, ordered=0> (a boolean; the column holds text"),
    ({"field": "raw", "ne": True}, "value true does not fit column 'raw' of type binary (a boolean; the column holds "
     "bytes, not true or false"),
])
def test_values_no_comparison_fits_are_refused_in_the_authors_terms(spec, says):
    table = docs().append_column("raw", pa.array([b"1", b"2", b"3", b"4", b"5", None])) \
        .append_column("code", pa.array(["5", "7", "5", "10", "9", None]).dictionary_encode())
    with pytest.raises(FilterError) as err:
        filter_table(table, MetadataFilter.model_validate(spec))
    assert says in err.value.message and err.value.field == "params.filter", err.value.message


@pytest.mark.parametrize("spec", [{"field": "draft", "eq": 5}, {"field": "draft", "eq": 10 ** 30},
                                  {"field": "draft", "lt": -10 ** 400}, {"field": "draft", "in": [5, 10 ** 30]},
                                  {"field": "draft", "not_in": [5]}, {"field": "draft", "ne": "x"},
                                  {"field": "draft", "year": 2019, "month": 5}, {"not": {"field": "draft", "gt": 1}}])
def test_a_column_null_in_every_row_matches_no_condition(spec):
    """Whatever the value: an integer no Arrow type holds matches nothing there, as 5 does (it was a 422 quoting
    Python's 'int too large to convert to C long'; in and not_in failed in Arrow, 'Invalid null value')."""
    table = docs().append_column("draft", pa.nulls(6))
    assert filter_table(table, MetadataFilter.model_validate(spec)).num_rows == 0
    either = MetadataFilter.model_validate({"any": [spec, {"field": "lang", "eq": "de"}]})
    assert filter_table(table, either).column("docno").to_pylist() == ["d1"]


def test_a_quoted_number_compares_with_text_as_text():
    table = docs().append_column("code", pa.array(["5", "7", "5", "10", "9", None]))
    assert filter_table(table, MetadataFilter.model_validate({"field": "code", "in": ["5", "10"]})) \
        .column("docno").to_pylist() == ["d0", "d2", "d3"]
    assert filter_table(table, MetadataFilter.model_validate({"field": "code", "gt": "5"})) \
        .column("docno").to_pylist() == ["d1", "d4"]  # as text: '10' sorts before '5'


def test_a_condition_arrow_cannot_evaluate_is_named_as_written():
    """Not Arrow's compiled expression (``is_in(utf8_lower(cast(region, {to_type=string, ...``): the condition, the
    value's type, the column's and the problem."""
    table = docs().append_column("raw", pa.array([b"\xff", b"EU", b"EU", b"EU", b"EU", None], pa.binary()))
    flt = MetadataFilter.model_validate({"any": [{"field": "lang", "eq": "en"}, {"country": "FR"},
                                                 {"not": {"field": "raw", "eq": "EU"}}]})
    assert filter_table(table, flt).column("docno").to_pylist() == ["d0", "d3", "d4", "d5"]  # bytes compare
    flt = MetadataFilter.model_validate({"any": [{"field": "lang", "eq": "en"}, {"region": "eu"}]})
    table = table.drop_columns(["region"]).append_column("region", table.column("raw"))
    with pytest.raises(FilterError) as err:
        filter_table(table, flt, step="f", op="postprocess.filter")
    message = err.value.message
    assert "filter {region: 'eu'} (text) cannot be evaluated on column 'region' of type binary: some of its values " \
           "are bytes that are not valid UTF-8 text" in message, message
    assert not any(word in message for word in ("is_in(", "cast(", "to_type", "utf8_lower")), message
    assert (err.value.field, err.value.step) == ("params.filter", "f")


def test_the_filter_is_a_json_schema_param():
    schema = MetadataFilter.model_json_schema()  # recursive: the properties sit under $defs
    properties = schema["$defs"]["MetadataFilter"]["properties"]
    assert {"field", "eq", "in", "year", "country", "all", "any", "not"} <= set(properties)
    assert MetadataFilter.model_validate({"field": "year", "in": [2019]}).in_ == [2019]


@pytest.mark.parametrize("spatial, field, says", [
    ({"region": ["Europe", 3]}, "params.filter.region.1", "must be a string (got 3)"),
    ({"country": {"code": "FR"}}, "params.filter.country",
     "must be a string or a list of strings (got {'code': 'FR'})"),
    ({"any": [{"region": 5}]}, "params.filter.any.0.region", "must be a string or a list of strings (got 5)"),
    ({"field": "year", "in": [[2019]]}, "params.filter.in.0",
     "must be a boolean, a number, a date or a string (got [2019])"),
])
def test_a_bad_country_or_region_names_the_value_not_the_filter_as_a_name(spatial, field, says):
    """A list of regions is allowed: its bad item is the error, and filter is never said to take a name. The field is
    the filter's path as written (``filter.region.1``), not pydantic's (``filter.region.list[str].1``, a union's
    branch), and a value of no branch's kind says each kind it may be."""
    from operators.errors import ParamsError
    from operators.registry import create

    with pytest.raises(ParamsError) as caught:
        create("retrieve.bm25", {"index": "idx", "filter": spatial})
    assert caught.value.field == field and says in str(caught.value)
    assert "takes a name" not in str(caught.value)


def test_missing_keeps_the_rows_without_a_value_which_every_other_condition_drops():
    """Documents with no date (d5's year is null) can be kept beside a year range, or be the only ones kept."""
    assert matching({"field": "year", "gte": 2019}) == ["d1", "d2", "d3", "d4"]
    assert matching({"any": [{"field": "year", "gte": 2019}, {"field": "year", "missing": True}]}) == \
        ["d1", "d2", "d3", "d4", "d5"]
    assert matching({"field": "country", "missing": True}) == ["d5"]
    assert matching({"field": "year", "missing": False}) == ["d0", "d1", "d2", "d3", "d4"]
    assert matching({"not": {"field": "year", "missing": True}}) == ["d0", "d1", "d2", "d3", "d4"]
    null_column = docs().append_column("draft", pa.nulls(6))
    assert filter_table(null_column, MetadataFilter.model_validate({"field": "draft", "missing": True})).num_rows == 6


@pytest.mark.parametrize("annotation, value, said, client", [
    (str | list[str], 5, "must be a string or a list of strings (got 5)",
     "must be a string or an array of strings, not a number"),
    (int | list[int], "x", "must be a whole number or a list (got 'x')", None),
    (int | float, "x", "must be a number (got 'x')", None),
    # a mapping said "an object", JSON's word, beside a spec's "a list" and "a mapping"
    (str | dict[str, int], 5, "must be a string or a mapping (got 5)", "must be a string or an object, not a number"),
    (str | list[dict[str, int]], 5, "must be a string or a list of mappings (got 5)",
     "must be a string or an array of objects, not a number"),
    (dict[str, int], [1], "must be a mapping (names and values) (got [1])", None),
])
def test_a_params_union_is_worded_as_a_lists_param_is_not_in_jsons_words(annotation, value, said, client):
    """A param of ``list[str]`` said "must be a list" where one of ``str | list[str]`` said "an array of strings",
    JSON's words, which only an HTTP body's own fields keep (``client_problems``)."""
    from pydantic import ValidationError, create_model

    from operators.errors import client_problems, value_problem

    model = create_model("Params", p=(annotation, ...))
    with pytest.raises(ValidationError) as err:
        model(p=value)
    errors = err.value.errors()
    assert value_problem(errors[0], errors) == said
    if client is not None:
        assert client_problems(errors) == [("p", client)]
