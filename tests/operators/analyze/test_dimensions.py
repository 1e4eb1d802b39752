"""analyze.dimensions: contract, dates and places in real Wikipedia sentences, junk that must stay out."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import create
from operators.testing import OperatorContract

# Sentences from the leads of English Wikipedia articles (the vital-articles corpus), with what they name.
REAL = [
    ("The Eiffel Tower is a lattice tower on the Champ de Mars in Paris, France. It is named after the engineer "
     "Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.",
     ["1887/1889"], ["Paris", "France"], "FR", "Europe"),
    ("Construction of the Berlin Wall was commenced by the government of the GDR on 13 August 1961.",
     ["1961-08-13"], [], None, None),
    ("Napoleon Bonaparte was Emperor of the French from 18 May 1804 until his first abdication in 1814, with a "
     "brief restoration during the Hundred Days in 1815. He led military campaigns across Europe.",
     ["1804-05-18", "1814", "1815"], ["Europe"], None, "Europe"),
    ("Tokyo is the capital and most populous city of Japan. The population of the city proper was over 14 million "
     "as of 2023.",
     ["2023"], ["Tokyo", "Japan"], "JP", "Asia"),
    ("Paris is the capital and largest city of France, with an estimated city population of 2.04 million in an "
     "area of 105.4 km2 (40.7 sq mi), and a metropolitan population of 13.2 million as of January 2026.",
     ["2026-01"], ["Paris", "France"], "FR", "Europe"),
    ("Mount Everest marks part of the China–Nepal border at its summit. Its height was most recently measured in "
     "2020 through a joint survey by Nepalese and Chinese authorities as 8,848.86 m.",
     ["2020"], ["China", "Nepal"], "CN", "Asia"),
    ("20th-century classical music is Western art music that was written between 1901 and 2000, inclusive.",
     ["1900/1999", "1901/2000"], [], None, None),
    ("The Great Depression was a severe global economic downturn from 1929 to 1939. It hit the United States and "
     "spread to Germany, the United States being the most affected in the 1930s.",
     ["1929/1939", "1930/1939"], ["United States", "Germany"], "US", "North America"),
    ("Until the 1800s, both hand-made and machine-knit socks were manufactured, with the latter technique becoming "
     "more common in the 19th century, and continuing until the modern day.",  # the 1800s: the century
     ["1800/1899"], [], None, None),
    ("It flows in a southwesterly direction from Pittsburgh, Pennsylvania, to its mouth on the Mississippi River at "
     "Cairo, Illinois.", [], ["Pennsylvania", "Illinois"], "US", "North America"),  # Cairo, Illinois: no Egypt
]

# Numbers that are not years, names that are not places: nothing may be extracted.
JUNK = [
    "The runners climbed to 1500 metres in 1500 seconds.",
    "By 2000 people had signed the petition, and in 1200 games he scored 1800 points.",
    "Room 1984 is on floor 12; call 555-1999 or see pp. 1203–1250.",
    "The temperature rose 1200 degrees from 1100 to 1500 kelvin.",
    "Christopher Columbus and Sam Houston met Salvador Dalí.",
    "Abd al-Rahman III was the Umayyad Emir of Córdoba.",  # Córdoba: a large city in Spain and in Argentina
    "Bees may visit 2000 flowers a day; the second hive is now empty.",
    "Hammurabi ruled Babylon from about 1792 BC to 1750 BC.",
    "Bronze-age trade collapsed in the 1200s BC; the citadel fell c. 1180 B.C",  # a decade BC, B.C without its dot
]


def extract(texts, **params):
    return create("analyze.dimensions", params)(pa.table({"text": pa.array(texts, pa.string())}))


class TestDimensionsContract(OperatorContract):
    operator_name = "analyze.dimensions"


class TestTemporalOnlyContract(OperatorContract):
    operator_name = "analyze.dimensions"

    def make_operator(self, **params):
        return create(self.operator_name, {"spatial": False, **params})


@pytest.mark.parametrize("text, dates, places, country, region", REAL, ids=[r[0][:24] for r in REAL])
def test_real_sentences(text, dates, places, country, region):
    row = extract([text]).to_pylist()[0]
    assert row["dates"] == dates
    assert row["places"] == places
    assert (row["country"], row["region"]) == (country, region)


@pytest.mark.parametrize("text", JUNK)
def test_junk_is_not_extracted(text):
    row = extract([text]).to_pylist()[0]
    assert (row["dates"], row["places"], row["year"], row["country"]) == ([], [], None, None)


def test_year_is_the_most_named_and_the_span_covers_every_mention():
    text = ("The war began in 1939. In 1941 the fighting spread; by 1941 it was global. It ended on 2 September "
            "1945.")
    row = extract([text]).to_pylist()[0]
    assert row["dates"] == ["1939", "1941", "1945-09-02"]
    assert (row["year"], row["year_min"], row["year_max"]) == (1941, 1939, 1945)


def test_countries_rank_by_mentions_and_cities_count_for_their_country():
    row = extract(["Japan traded with France. Tokyo and Osaka grew; Japan became rich."]).to_pylist()[0]
    assert row["countries"] == ["JP", "FR"] and row["country"] == "JP" and row["region"] == "Asia"


def test_a_country_name_inside_a_regions_is_not_that_country():
    """'New England' was GB (England) and 'Northern Ireland' IE: Robert Frost's and Tom Brady's articles matched
    {country: GB} and {region: Europe} and missed {country: US}."""
    out = extract(["Robert Frost's poems are set in rural New England.", "Belfast is the capital of Northern Ireland.",
                   "England and Ireland played at Twickenham."]).to_pylist()
    assert [row["countries"] for row in out] == [["US"], ["GB"], ["GB", "IE"]]


def test_a_city_qualified_by_another_countrys_state_or_country_is_its_namesake():
    rows = extract(["Paris, Texas is a small city.", "Moscow, Idaho and Houston, Texas.",
                    "Berlin, Paris, New York City and Rome.", "Toronto, Canada."]).to_pylist()
    assert [(r["places"], r["countries"]) for r in rows] == [
        (["Texas"], ["US"]), (["Idaho", "Houston", "Texas"], ["US"]),
        (["Berlin", "Paris", "New York City", "Rome"], ["DE", "FR", "US", "IT"]), (["Toronto", "Canada"], ["CA"])]


def test_a_state_after_the_that_ends_its_clause_is_the_river():
    rows = extract(["George Washington crossed the Delaware.", "It joins the Mississippi, the Missouri.",
                    "Barges sail the Delaware River daily.", "The Texas border is long.",
                    "Dover is in Delaware.", "It crossed the Ohio–Pennsylvania line.",
                    "Congress sits in the District of Columbia."]).to_pylist()
    assert [r["places"] for r in rows] == [[], [], [], ["Texas"], ["Delaware"], ["Ohio", "Pennsylvania"],
                                           ["District of Columbia"]]


def test_title_is_read_before_the_text():
    table = pa.table({"title": ["Tokyo"], "text": ["It is the capital and most populous city of the country."]})
    row = create("analyze.dimensions")(table).to_pylist()[0]
    assert row["country"] == "JP"
    no_title = create("analyze.dimensions", {"title_column": None})(table).to_pylist()[0]
    assert no_title["country"] is None


def test_invalid_dates_and_years_outside_the_bounds_are_left_out():
    row = extract(["It was signed on 30 February 1990, in 1066 and in 2150."], min_year=1500).to_pylist()[0]
    assert row["dates"] == []


def test_null_and_empty_texts_get_empty_lists_and_nulls():
    out = extract([None, ""]).to_pylist()
    assert [(r["dates"], r["year"], r["places"], r["country"]) for r in out] == [([], None, [], None)] * 2


def test_columns_feed_the_metadata_filters():
    out = extract([r[0] for r in REAL])
    assert out.schema.field("year").type == pa.int32() and out.schema.field("country").type == pa.string()
    in_europe = create("postprocess.filter", {"filter": {"region": "europe"}})(out)
    # the Great Depression (US first, then Germany) is in Europe too: any of a text's regions matches
    assert sorted(in_europe.column("country").to_pylist(), key=str) == ["FR", "FR", None, "US"]
    overlapping_1880s = {"all": [{"field": "year_min", "lte": 1889}, {"field": "year_max", "gte": 1880}]}
    kept = create("postprocess.filter", {"filter": overlapping_1880s})(out)
    assert kept.column("dates").to_pylist() == [["1887/1889"], ["1800/1899"]]  # the 1800s overlap the 1880s


def test_bad_params_name_the_field():
    with pytest.raises(ParamsError, match="nothing to extract"):
        create("analyze.dimensions", {"temporal": False, "spatial": False})
    with pytest.raises(ParamsError, match="params.min_city_population"):
        create("analyze.dimensions", {"min_city_population": 10})
