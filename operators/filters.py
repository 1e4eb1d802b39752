"""Metadata filters: one pydantic model, compiled to a ``pyarrow.compute.Expression``.

A filter is a mapping; every condition written in one mapping must hold (AND)::

    {field: year, gte: 2010, lte: 2020}                 # range on any column
    {field: lang, in: [en, de]}                         # membership
    {field: published, year: 2019, month: 5}            # temporal: a date/timestamp/ISO-string column,
    {field: published, date_from: 2019-01-01, date_to: 2019-06-30}  # or a column of years
    {country: [FR, DE], region: Europe}                 # spatial: any of its countries, any of its regions
    {any: [{field: year, lt: 1990}, {country: JP}]}     # boolean or
    {all: [...]} / {not: {...}}                         # boolean and / not
    {any: [{field: year, gte: 1900}, {field: year, missing: true}]}  # ... or the row has no year

The same model serves the retrievers' pre-filter (``where`` handed to the index, so
search is restricted to matching chunks), their post-filter and
``postprocess.filter``: two categories, so it lives here rather than in either one.
Rows whose column is null never match a condition on that column (not even under
``not``), as in SQL, but ``missing: true``, which matches exactly them (documents with no
date). A country condition matches a document any of whose countries it names: its ``country`` or, where
the doc store has that list column (``analyze.dimensions``), an item of ``countries`` (``{field: country, eq:
FR}`` reads the first-ranked one alone); a region condition likewise reads ``region`` and ``regions``. How a
value meets its column's type (numbers as numbers, the rest cast) is ``operators.filter_values``, the Arrow
pieces a condition compiles to ``operators.filter_conditions``; a condition
Arrow cannot evaluate on the rows is named as written (``evaluation_error``), never as Arrow's compiled
expression.
"""

from __future__ import annotations

import calendar
import datetime as dt
from typing import Any, Union

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from operators.errors import close_names
from operators.filter_conditions import LISTS, Condition, casts_to_string, day_bound, join, listed, period_bound
from operators.filter_values import (NO_ROW, FilterError, any_listed, comparison, kind_of, membership,
                                     null_comparison, shown)

Scalar = Union[bool, int, float, dt.date, str]

COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte")


class MetadataFilter(BaseModel):
    """A metadata filter over doc-store columns; all conditions written in one mapping must hold."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    field: str | None = Field(None, min_length=1, description="Column the comparison, membership or temporal "
                              "conditions of this mapping apply to.")
    eq: Scalar | None = Field(None, description="The column equals this value.")
    ne: Scalar | None = Field(None, description="The column differs from this value.")
    gt: Scalar | None = Field(None, description="The column is greater than this value.")
    gte: Scalar | None = Field(None, description="The column is at least this value.")
    lt: Scalar | None = Field(None, description="The column is less than this value.")
    lte: Scalar | None = Field(None, description="The column is at most this value.")
    in_: list[Scalar] | None = Field(None, alias="in", description="The column is one of these values.")
    not_in: list[Scalar] | None = Field(None, description="The column is none of these values.")
    year: int | None = Field(None, ge=1, le=9999, description="Temporal: the date in `field` falls in this year "
                             "(`field` may hold dates, timestamps, ISO-8601 strings or plain years).")
    month: int | None = Field(None, ge=1, le=12, description="Temporal: the date in `field` falls in this month "
                              "(of `year` when given, else of any year).")
    date_from: dt.date | None = Field(None, description="Temporal: the date in `field` is on or after this day.")
    date_to: dt.date | None = Field(None, description="Temporal: the date in `field` is on or before this day.")
    missing: bool | None = Field(None, description="true: `field` has no value in the row (null; no date was "
                                 "found, say); false: it has one. The one condition a null matches.")
    country: str | list[str] | None = Field(None, description="Spatial: this country or one of these "
                                            "(case-insensitive) is one of the document's: its `country` column "
                                            "or an item of its `countries` list column, where the doc store has "
                                            "one (`analyze.dimensions` writes both).")
    region: str | list[str] | None = Field(None, description="Spatial: this region or one of these "
                                           "(case-insensitive) is one of the document's: its `region` column "
                                           "or an item of its `regions` list column, where the doc store has "
                                           "one (`analyze.dimensions` writes both).")
    all_: list["MetadataFilter"] | None = Field(None, alias="all", description="Every one of these filters holds.")
    any_: list["MetadataFilter"] | None = Field(None, alias="any", description="At least one of these filters holds.")
    not_: "MetadataFilter | None" = Field(None, alias="not", description="This filter does not hold.")

    @model_validator(mode="before")
    @classmethod
    def _one_value_per_comparison(cls, data: Any) -> Any:
        """A list under a comparison is named as that (pydantic tried each member of the value union and named
        its first, `filter.eq.bool: Input should be a valid boolean`)."""
        if isinstance(data, dict):
            if (null := null_comparison(data)) is not None:  # {field: lang, eq: null}: missing was meant
                raise ValueError(null)
            known = {f.alias or name for name, f in cls.model_fields.items()}
            taken = known | set(cls.model_fields)  # by field name too (in_, all_: a dumped filter sent on)
            for name in data:  # a misspelt key: {fild: year} or {eqq: 1} (told to write {field: fild, ...})
                if name not in taken and (close := close_names(str(name), known, words=False)):
                    raise ValueError(f"unknown key '{name}'; did you mean '{close[0]}'? (keys: "
                                     f"{', '.join(sorted(known))})")
            for name, value in data.items():  # {title: X}: the shorthand only country and region have
                if name not in known and "field" not in data and not isinstance(value, (dict, list)):
                    raise ValueError(f"unknown key '{name}': a condition on a column names it as field, e.g. "
                                     f"{{field: {name}, eq: {value!r}}}")
            for name in COMPARISONS:
                if isinstance(data.get(name), (list, tuple, dict)):
                    kind = "a mapping" if isinstance(data[name], dict) else "a list"
                    several = {"eq": "in", "ne": "not_in"}.get(name)
                    hint = (f"; for several values write {several}: {list(data[name])}"
                            if several and not isinstance(data[name], dict) else "")
                    raise ValueError(f"'{name}' takes one value (a number, text, date or true/false), not "
                                     f"{kind}{hint}")
        return data

    @model_validator(mode="after")
    def _check(self) -> "MetadataFilter":
        on_field = [name for name in (*COMPARISONS, "in_", "not_in", "year", "month", "date_from", "date_to",
                                      "missing")
                    if getattr(self, name) is not None]
        if on_field and self.field is None:
            names = [n.rstrip("_") for n in on_field]
            if len(names) == 1:
                raise ValueError(f"the condition '{names[0]}' needs 'field', the column it applies to: "
                                 f"{{field: COLUMN, {names[0]}: ...}}")
            raise ValueError(f"the conditions {', '.join(repr(n) for n in names)} need 'field', the column they "
                             "apply to: {field: COLUMN, " + ", ".join(f"{n}: ..." for n in names) + "}")
        if self.field is not None and not on_field:
            raise ValueError(f"'field: {self.field}' has no condition (eq, ne, gt, gte, lt, lte, in, not_in, "
                             "year, month, date_from, date_to, missing)")
        if not on_field and not any(getattr(self, n) is not None
                                    for n in ("country", "region", "all_", "any_", "not_")):
            raise ValueError("an empty filter: give a condition (field + eq/in/gte/..., country, region, all, any, "
                             "not)")
        if self.month is not None and self.date_from is not None:
            raise ValueError("give either month/year or date_from/date_to, not both")
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError(f"date_from {self.date_from} is after date_to {self.date_to}")
        for name, why in (("all_", "filter"), ("any_", "filter"), ("in_", "value (an empty list matches no row)"),
                          ("not_in", "value (an empty list excludes nothing: leave it out)")):
            if getattr(self, name) == []:
                raise ValueError(f"'{name.rstrip('_')}' needs at least one {why}")
        return self

    # -- compiling ------------------------------------------------------------

    def columns(self, schema: pa.Schema | None = None) -> set[str]:
        """Every column this filter needs; with ``schema``, also the ``countries`` (``regions``) list column a
        country (region) condition reads beside ``country`` (``region``) where ``schema`` has one (``listed``)."""
        cols = {self.field} if self.field else set()
        for column in ("country", "region"):
            if getattr(self, column) is not None:
                cols.add(column)
                if schema is not None and listed(schema, column):
                    cols.add(LISTS[column])
        for child in (self.all_ or []) + (self.any_ or []) + ([self.not_] if self.not_ else []):
            cols |= child.columns(schema)
        return cols

    def to_expression(self, schema: pa.Schema) -> pc.Expression:
        """The filter as an Arrow expression over a table (or doc store) with ``schema``.

        Raises ``FilterError`` naming the column when ``schema`` lacks it or its type
        does not fit the condition.
        """
        missing = sorted(self.columns() - set(schema.names))
        if missing:  # a name differing in case (views for Views) is said first
            close = "".join(f" ('{name}': did you mean '{found[0]}'?)" for name in missing
                            if (found := close_names(name, schema.names, words=False)))
            close += "".join(f" ('{name}': a filter reads whole columns, not fields inside one; '{top}' is "
                             f"{schema.field(top).type})" for name in missing
                             if (top := name.split(".")[0]) in schema.names)
            raise FilterError(f"filter column(s) {missing} not found{close}; available columns: {schema.names}",
                              field="params.filter")
        parts = [condition.expression for condition in self._own_conditions(schema)]
        if self.all_:
            parts.extend(child.to_expression(schema) for child in self.all_)
        if self.any_:
            parts.append(join([child.to_expression(schema) for child in self.any_], "or"))
        if self.not_ is not None:  # SQL's NOT: a row whose columns are null still does not match
            valid = [pc.field(c).is_valid() for c in sorted(self.not_.columns())]
            parts.append(join([~self.not_.to_expression(schema), *valid], "and"))
        return join(parts, "and")

    def conditions(self, schema: pa.Schema) -> list["Condition"]:
        """Every single condition of this filter and of the filters inside it, compiled for ``schema``: what names
        the one Arrow cannot evaluate on the rows (``evaluation_error``)."""
        out = self._own_conditions(schema)
        for child in (self.all_ or []) + (self.any_ or []) + ([self.not_] if self.not_ else []):
            out += child.conditions(schema)
        return out

    def _own_conditions(self, schema: pa.Schema) -> list["Condition"]:
        """The conditions written in this mapping (not in its all/any/not)."""
        out = []
        if self.field is not None:
            kind = schema.field(self.field).type
            column = pc.field(self.field)
            for name in COMPARISONS:
                value = getattr(self, name)
                if value is not None:
                    out.append(Condition.of(self.field, {name: value}, kind_of(value),
                                            comparison(column, name, value, kind, self.field)))
            for name, key in (("in_", "in"), ("not_in", "not_in")):
                values = getattr(self, name)
                if values is not None:
                    out.append(Condition.of(self.field, {key: values}, kind_of(values),
                                            membership(column, key, values, kind, self.field)))
            temporal = self._temporal(column, kind)
            if temporal:
                written = {n: getattr(self, n) for n in ("year", "month", "date_from", "date_to")
                           if getattr(self, n) is not None}
                out.append(Condition.of(self.field, written, "a period", join(temporal, "and")))
            if self.missing is not None:
                out.append(Condition.of(self.field, {"missing": self.missing}, "a boolean",
                                        column.is_null() if self.missing else column.is_valid()))
        for column, wanted in (("country", self.country), ("region", self.region)):
            if wanted is not None:
                kind = schema.field(column).type
                if not casts_to_string(kind):  # a list or struct column: Arrow would refuse it only once it runs
                    raise FilterError(f"column '{column}' is {kind}; a {column} filter needs a column of text",
                                      field=f"params.filter.{column}")
                values = [v.lower() for v in ([wanted] if isinstance(wanted, str) else wanted)]
                found = pc.utf8_lower(pc.field(column).cast(pa.string())).isin(values)
                if listed(schema, column):  # any of the document's countries (regions)
                    found = found | any_listed(pc.field(LISTS[column]), values)
                out.append(Condition(column, f"{{{column}: {shown(wanted)}}}", kind_of(wanted), found))
        return out

    def _temporal(self, column: pc.Expression, kind: pa.DataType) -> list[pc.Expression]:
        if self.year is None and self.month is None and self.date_from is None and self.date_to is None:
            return []
        if pa.types.is_null(kind):  # a column null in every row: no date falls anywhere (filter_values.NO_ROW)
            return [NO_ROW]
        if pa.types.is_integer(kind):  # a column of years
            if self.month is not None:
                raise FilterError(f"column '{self.field}' holds years ({kind}); a month filter needs a date, "
                                  "timestamp or ISO-string column", field="params.filter.month")
            parts = []
            if self.year is not None:
                parts.append(column == self.year)
            if self.date_from is not None:
                parts.append(column >= self.date_from.year)
            if self.date_to is not None:
                parts.append(column <= self.date_to.year)
            return parts
        if not (pa.types.is_date(kind) or pa.types.is_timestamp(kind) or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)):
            raise FilterError(f"column '{self.field}' is {kind}; temporal filters need a date, timestamp, "
                              "ISO-8601 string or integer-year column", field="params.filter")
        if self.month is not None and self.year is None:  # that month of any year
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                # a string that spells no ISO date is null here, so its row does not match (a cast would fail
                # the whole search on the first such value: a title, a "2021" alone)
                column = pc.strptime(pc.utf8_slice_codeunits(column, 0, 10), format="%Y-%m-%d", unit="s",
                                     error_is_null=True)
            return [pc.month(column) == self.month]
        start, end = None, None  # half-open [start, end)
        if self.year is not None:
            first = self.month or 1
            start = dt.date(self.year, first, 1)
            last = self.month or 12
            end = dt.date(self.year, last, calendar.monthrange(self.year, last)[1]) + dt.timedelta(days=1)
        if self.date_from is not None:
            start = max(start, self.date_from) if start else self.date_from
        if self.date_to is not None:
            day_after = self.date_to + dt.timedelta(days=1)
            end = min(end, day_after) if end else day_after
        latest = earliest = column
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # "2021" and "2021-05" are periods
            latest, earliest = period_bound(column, "99"), period_bound(column, "01")
        parts = []
        if start is not None:
            parts.append(latest >= day_bound(start, kind))
        if end is not None:
            parts.append(earliest < day_bound(end, kind))
        return parts


MetadataFilter.model_rebuild()


_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def apply_filter(table: pa.Table, flt: MetadataFilter, where: pc.Expression, *, step: str | None = None,
                 op: str | None = None) -> pa.Table:
    """``table.filter(where)`` (``where``: ``flt`` compiled), a ``FilterError`` naming the condition where Arrow
    cannot evaluate it on these rows (a value of a text column that is no valid UTF-8, say): the filter does not
    fit the data it was given, which the request can change, not a failure of the step."""
    try:
        return table.filter(where)
    except _ARROW_ERRORS as err:
        raise evaluation_error(flt, table, err, step=step, op=op) from None


def evaluation_error(flt: MetadataFilter, table: pa.Table | None, err: BaseException, *, step: str | None = None,
                     op: str | None = None, schema: pa.Schema | None = None) -> FilterError:
    """The error for ``flt``, which Arrow could not evaluate on ``table`` (``err``): it names the first condition
    that fails alone, as the filter's author wrote it, with the value's type and the column's, not Arrow's
    compiled expression (which spells casts and options the author never wrote). ``schema``: the one ``flt`` was
    compiled for, when not the table's (an index's columns as its shards' types merge, ``table`` one shard's)."""
    try:
        conditions = flt.conditions(schema or table.schema) if table is not None else []
    except (FilterError, KeyError):
        conditions = []
    for condition in conditions:
        try:
            table.filter(condition.expression)
        except _ARROW_ERRORS as failed:
            kind = table.schema.field(condition.column).type
            return FilterError(f"filter {condition.written} ({condition.kind}) cannot be evaluated on "
                               f"column '{condition.column}' of type {kind}: {_why(failed)}", step=step, op=op,
                               field="params.filter")
    return FilterError(f"the filter on column(s) {sorted(flt.columns())} cannot be evaluated on these rows: "
                       f"{_why(err)}", step=step, op=op, field="params.filter")


def _why(err: BaseException) -> str:
    """Why Arrow failed, in a line; undecodable bytes said in words."""
    text = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
    if "utf8" in text.lower().replace("-", ""):
        return f"some of its values are bytes that are not valid UTF-8 text, which this condition reads as text " \
               f"(Arrow: {text})"
    return f"Arrow: {text}"


def filter_table(table: pa.Table, flt: MetadataFilter | None, *, step: str | None = None,
                 op: str | None = None) -> pa.Table:
    """Rows of ``table`` that match ``flt`` (all rows when None); errors name the step."""
    if flt is None or (table.num_rows == 0 and flt.columns() - set(table.column_names)):
        return table
    try:
        where = flt.to_expression(table.schema)
    except FilterError as err:
        raise FilterError(err.message, step=step, op=op, field=err.field) from None
    return apply_filter(table, flt, where, step=step, op=op)
