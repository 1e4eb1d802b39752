"""sources.sql on a real SQLite file: table and query, chunked reads, errors."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pytest

from operators.errors import ParamsError, SourceError, SourceNotFoundError
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract


def sample_table() -> pa.Table:
    return create("sources.jsonl", {"path": str(SAMPLE_CORPUS)})(pa.table({}))


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    """A SQLite file holding the sample corpus in ``documents(id, title, body, position)``."""
    path = tmp_path_factory.mktemp("sql") / "docs.db"
    rows = sample_table().to_pylist()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE documents (id TEXT PRIMARY KEY, title TEXT, body TEXT, position INTEGER)")
        conn.executemany("INSERT INTO documents VALUES (?, ?, ?, ?)",
                         [(r["docno"], r["title"], r["text"], i) for i, r in enumerate(rows)])
    return path


class TestSqlContract(OperatorContract):
    operator_name = "sources.sql"

    @pytest.fixture(autouse=True)
    def _db(self, sample_db):
        self.url = f"sqlite:///{sample_db}"

    def make_operator(self, **params):
        return create(self.operator_name, {"url": self.url, "table": "documents", "id_field": "id",
                                           "text_field": "body", **params})


def test_table_reads_every_row_in_chunks(sample_db):
    op = create("sources.sql", {"url": f"sqlite:///{sample_db}", "table": "documents", "id_field": "id",
                                "text_field": "body", "batch_rows": 300})
    tables = list(op.read(op.splits()[0]))
    assert [t.num_rows for t in tables] == [300, 300, 300, 100]
    out = pa.concat_tables(tables)
    assert out.column_names == ["docno", "title", "text", "position"]
    expected = sample_table()
    assert out.select(["docno", "title", "text"]).equals(expected)
    assert out.column("position").to_pylist() == list(range(expected.num_rows))


def test_query_with_beir_names_and_limit(sample_db):
    op = create("sources.sql", {
        "url": f"sqlite:///{sample_db}",
        "query": "SELECT id AS _id, body AS text FROM documents WHERE position % 2 = 0 ORDER BY position",
        "limit": 5,
    })
    out = op(pa.table({}))
    assert out.column_names == ["docno", "title", "text"]
    assert out.column("docno").to_pylist() == sample_table().column("docno").to_pylist()[0:10:2]


def test_missing_database_names_the_file(tmp_path):
    missing = tmp_path / "absent.db"
    with pytest.raises(SourceNotFoundError, match="absent.db"):
        create("sources.sql", {"url": f"sqlite:///{missing}", "table": "documents"})(pa.table({}))
    assert not missing.exists(), "reading must not create an empty database"


def test_bad_table_and_bad_query_are_source_errors(sample_db):
    url = f"sqlite:///{sample_db}"
    with pytest.raises(SourceError, match="table 'nope' failed: no such table: nope"):
        create("sources.sql", {"url": url, "table": "nope"})(pa.table({}))
    with pytest.raises(SourceError, match="no text column 'text'"):
        create("sources.sql", {"url": url, "query": "SELECT id FROM documents"})(pa.table({}))


@pytest.mark.parametrize("params", [{}, {"table": "documents", "query": "SELECT 1"}])
def test_query_or_table_is_required(sample_db, params):
    with pytest.raises(ParamsError) as err:
        create("sources.sql", {"url": f"sqlite:///{sample_db}", **params})
    assert err.value.field == "params.table"
