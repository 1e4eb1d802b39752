"""Per-row language handling shared by the language-aware text operators.

Every such operator reads an optional per-row language column (``language`` by
default) and falls back to ``default_language`` where the column is absent or
null. Codes are normalised by :func:`normalize_language`: ISO 639-1 (``de``),
639-2/B and /T and 639-3 (``ger``, ``deu``), locale tags (``de-AT``) and English
names (``German``), case-insensitive. Rows in a language the operators do not
support pass through unchanged.

Work is vectorised: rows are grouped by language once per batch, each group is
handed whole to the operator's ``process(language, texts)``, and the results are
put back in row order with one Arrow ``take``::

    groups = group_rows_by_language(table, "language", "en")
    out = apply_by_language(table.column("text"), groups, lambda lang, texts: texts)
"""

from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.tables import as_string_array, set_column, text_column

#: Languages the preprocessing operators support, as ISO 639-1 codes.
SUPPORTED_LANGUAGES: tuple[str, ...] = ("en", "de", "fr", "it")

#: Snowball algorithm names (PyStemmer) of the supported languages.
SNOWBALL_NAMES = {"en": "english", "de": "german", "fr": "french", "it": "italian"}

_ALIASES = {
    "en": ("en", "eng", "english"),
    "de": ("de", "deu", "ger", "german", "deutsch"),
    "fr": ("fr", "fra", "fre", "french", "francais", "français"),
    "it": ("it", "ita", "italian", "italiano"),
}
_LOOKUP = {alias: code for code, aliases in _ALIASES.items() for alias in aliases}


def normalize_language(code: object) -> str | None:
    """``"en"``, ``"de"``, ``"fr"`` or ``"it"`` for any accepted spelling of them; else ``None``.

    Accepts ISO 639-1, 639-2/B, 639-2/T and 639-3 codes, locale tags such as
    ``en-US`` or ``fr_CA`` (the region is ignored) and English names, in any case.
    """
    if not isinstance(code, str):
        return None
    key = code.strip().lower()
    if key in _LOOKUP:
        return _LOOKUP[key]
    for sep in ("-", "_"):
        if sep in key:
            return _LOOKUP.get(key.split(sep, 1)[0])
    return None


def group_rows_by_language(
    table: pa.Table, language_column: str | None, default_language: str
) -> dict[str | None, np.ndarray]:
    """Row indices of ``table`` per normalised language (``None``: unsupported, pass through).

    Rows whose language is null, and every row when ``language_column`` is ``None``
    or not in the table, take ``default_language``. Each distinct value of the
    column is normalised once, not once per row.
    """
    n = table.num_rows
    if n == 0:
        return {}
    default = normalize_language(default_language)
    if not language_column or language_column not in table.column_names:
        return {default: np.arange(n)}
    column = as_string_array(table.column(language_column))
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = column.cast(pa.string())
    encoded = pc.dictionary_encode(column)
    slots: list[str | None] = [None, *SUPPORTED_LANGUAGES]
    lookup = np.array([slots.index(normalize_language(v)) for v in encoded.dictionary.to_pylist()] + [0])
    indices = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    row_slot = np.where(indices >= 0, lookup[indices], slots.index(default))
    return {slots[slot]: np.flatnonzero(row_slot == slot) for slot in np.unique(row_slot)}


def apply_by_language(
    texts: pa.ChunkedArray | pa.Array,
    groups: dict[str | None, np.ndarray],
    process: Callable[[str, pa.Array], pa.Array],
) -> pa.Array:
    """Run ``process(language, texts_of_group)`` once per supported language, in row order.

    ``process`` gets a plain string array that may hold nulls and must return an
    array of the same length with nulls kept. The ``None`` group is left as it is.
    """
    texts = as_string_array(texts)
    if not groups:
        return texts
    if len(groups) == 1:
        (language, _), = groups.items()
        return texts if language is None else _checked(process(language, texts), texts)
    pieces, order = [], []
    for language, rows in groups.items():
        part = texts.take(pa.array(rows))
        if language is not None:
            part = _checked(process(language, part), part)
        pieces.append(part)
        order.append(rows)
    perm = np.concatenate(order)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(len(perm))
    return pa.concat_arrays(pieces).take(pa.array(inverse))


def _checked(result: pa.Array | pa.ChunkedArray, source: pa.Array) -> pa.Array:
    result = as_string_array(result)
    if len(result) != len(source):
        raise RuntimeError(f"[Internal] text processing returned {len(result)} rows for {len(source)}")
    return result.cast(source.type) if result.type != source.type else result


class LanguageParams(BaseModel):
    """Params every language-aware text operator shares."""

    model_config = ConfigDict(extra="forbid")
    input_column: str = Field("text", description="Column whose text is processed.")
    output_column: str | None = Field(
        None, description="Column that receives the processed text; None writes it back into input_column."
    )
    language_column: str | None = Field(
        "language",
        description=(
            "Column holding each row's language (ISO 639-1/2/3 code such as 'de', 'deu', 'ger', or an English "
            "name). Rows where it is missing or null use default_language; None ignores such a column."
        ),
    )
    default_language: str = Field(
        "en",
        description=(
            "Language of rows without one: en, de, fr or it, in any spelling language_column accepts. "
            "Rows in other languages pass through unchanged."
        ),
    )

    @field_validator("default_language")
    @classmethod
    def _a_supported_language(cls, value: str) -> str:
        """``xx`` or ``es`` made every row without a language pass through unchanged, without a word."""
        if normalize_language(value) is None:
            raise ValueError(f"'{value}' is none of the languages these steps process ({', '.join(SUPPORTED_LANGUAGES)}"
                             ", in any spelling: de, deu, german, de-DE); rows of another language, named in "
                             "language_column, pass through unchanged")
        return value


class LanguageTextRewriter(Operator):
    """Base of the row operators that rewrite a text column language by language.

    Subclasses set ``name`` and ``Params`` (a :class:`LanguageParams` subclass) and
    implement ``process(language, texts)`` for one language's rows.
    """

    Params: ClassVar[type[BaseModel]] = LanguageParams

    @property
    def output_column(self) -> str:
        return self.params.output_column or self.params.input_column

    def reads(self) -> list[str]:
        columns = [self.params.input_column]
        if self.params.language_column and self.params.language_column not in columns:
            columns.append(self.params.language_column)
        return columns

    def requires(self) -> list[str]:
        # The language column is optional: rows without one use default_language.
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        return {self.output_column: "text"}

    def process(self, language: str, texts: pa.Array) -> pa.Array:
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def transform(self, table: pa.Table) -> pa.Table:
        texts = text_column(table, self.params.input_column, op=self.name, step=self.step_id)
        groups = group_rows_by_language(table, self.params.language_column, self.params.default_language)
        return set_column(table, self.output_column, apply_by_language(texts, groups, self.process))
