"""SQL document source (any SQLAlchemy database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field, ValidationInfo, field_validator

from operators.base import Source
from operators.errors import SourceError, SourceNotFoundError
from operators.local_files import local_path
from operators.sources._common import DocumentMapper, DocumentParams, rebatch, values_to_array


#: What a query may do in SQLite (the authorizer's action codes): read tables, call functions, recurse. Anything
#: else is refused, since a query runs unchanged on the file: ``DROP TABLE`` dropped (the driver commits DDL at once),
#: and ``VACUUM INTO '/any/path'`` and ``ATTACH '/any/path'`` wrote files anywhere the process may, outside the
#: folders the service reads from (its ``data_roots``), whatever a spec from a client was allowed to name.
_SQLITE_READS = frozenset({20, 21, 31, 33})  # SQLITE_READ, SQLITE_SELECT, SQLITE_FUNCTION, SQLITE_RECURSIVE


def _read_only(connection: Any, _record: Any) -> None:
    """A new SQLite connection that only reads: every statement but a ``SELECT`` is refused as it is prepared."""
    import sqlite3

    connection.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _SQLITE_READS else sqlite3.SQLITE_DENY)


class SqlSource(Source):
    """Read documents from a SQL database through SQLAlchemy, streamed in chunks of ``batch_rows``.

    Give a ``query`` or a ``table``; a SQLite file is only read (a query that writes, attaches a file or vacuums
    is refused: "not authorized"). Result columns are mapped to ``docno, title,
    text`` like the file sources, and the other columns are kept. The result is read
    as one split, with a server-side cursor where the driver has one.

    Usage::

        SqlSource({"url": "sqlite:///docs.db", "table": "documents", "id_field": "id"})(pa.table({}))
        # docno, title, text, <other columns>
    """

    name = "sources.sql"

    class Params(DocumentParams):
        url: str = Field(..., min_length=1, json_schema_extra=local_path(), description="SQLAlchemy database URL, e.g. `sqlite:///docs.db`.")
        query: str | None = Field(None, description="SELECT statement giving one row per document (SQLite: read only).")
        table: str | None = Field(
            None, validate_default=True, description="Table (or `schema.table`) to read whole, instead of a query."
        )

        @field_validator("table")
        @classmethod
        def _query_or_table(cls, table: str | None, info: ValidationInfo) -> str | None:
            query = info.data.get("query")
            if (query is None) == (table is None):
                raise ValueError("give either `query` or `table`" + (", not both" if table else ""))
            return table

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def _engine(self) -> Any:
        import sqlalchemy as sa

        try:
            url = sa.engine.make_url(self.params.url)
        except sa.exc.ArgumentError as err:
            raise SourceError(f"bad database URL: {err}", op=self.name, step=self.step_id, field="params.url") from None
        database = url.database or ""
        if url.get_backend_name() == "sqlite" and database not in ("", ":memory:") and not database.startswith("file:"):
            if not Path(database).is_file():  # SQLite would create an empty file instead of failing
                raise SourceNotFoundError(
                    f"SQLite database '{database}' does not exist", op=self.name, step=self.step_id, field="params.url"
                )
        engine = sa.create_engine(url)
        if url.get_backend_name() == "sqlite":
            sa.event.listen(engine, "connect", _read_only)
        return engine

    def _statement(self) -> Any:
        import sqlalchemy as sa

        if self.params.query is not None:
            return sa.text(self.params.query)
        schema, _, name = self.params.table.rpartition(".")
        return sa.select(sa.text("*")).select_from(sa.table(name, schema=schema or None))

    def read(self, split: Any) -> Iterator[pa.Table]:
        yield from rebatch(self._tables(), self.params.batch_rows, self.params.limit)

    def _tables(self) -> Iterator[pa.Table]:
        import sqlalchemy as sa

        p = self.params
        mapper = DocumentMapper(p, op=self)
        what = f"query {p.query!r}" if p.query is not None else f"table '{p.table}'"
        engine = self._engine()
        try:
            with engine.connect() as conn:
                result = conn.execution_options(stream_results=True, yield_per=p.batch_rows).execute(self._statement())
                keys = list(result.keys())
                for rows in result.partitions(p.batch_rows):
                    columns = list(zip(*rows))
                    table = pa.table({key: values_to_array(list(values)) for key, values in zip(keys, columns)})
                    yield mapper.from_table(table, where=what)
        except sa.exc.SQLAlchemyError as err:
            reason = str(getattr(err, "orig", None) or err).splitlines()[0]
            raise SourceError(f"{what} failed: {reason}", op=self.name, step=self.step_id) from err
        finally:
            engine.dispose()
