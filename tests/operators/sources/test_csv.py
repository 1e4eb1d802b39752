"""sources.csv: contract, quoted newlines, ids kept as strings, one split per file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from operators.errors import ParamsError, SourceError, SourceNotFoundError
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract


def sample_table() -> pa.Table:
    return create("sources.jsonl", {"path": str(SAMPLE_CORPUS)})(pa.table({}))


@pytest.fixture(scope="module")
def sample_csv(tmp_path_factory):
    """The sample corpus as CSV with BEIR column names (texts hold commas and quotes)."""
    path = tmp_path_factory.mktemp("csv") / "corpus.csv"
    pcsv.write_csv(sample_table().rename_columns(["_id", "title", "text"]), path)
    return path


class TestCsvContract(OperatorContract):
    operator_name = "sources.csv"

    @pytest.fixture(autouse=True)
    def _corpus(self, sample_csv):
        self.path = sample_csv

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(self.path), **params})


def test_same_documents_as_the_jsonl_source(sample_csv):
    op = create("sources.csv", {"path": str(sample_csv), "batch_rows": 128})
    tables = list(op.read(op.splits()[0]))
    assert all(t.num_rows <= 128 for t in tables)
    assert pa.concat_tables(tables).equals(sample_table())


def test_tsv_with_quoted_newlines_and_zero_padded_ids(tmp_path):
    path = tmp_path / "docs.tsv"
    path.write_text('id\theadline\tbody\tscore\n007\tBond\t"line one\nline two"\t1.5\n'
                    '042\t\tno title\t2\n', encoding="utf-8")
    out = create("sources.csv", {"path": str(path), "delimiter": "\t", "id_field": "id",
                                 "title_field": "headline", "text_field": "body"})(pa.table({}))
    assert out.to_pylist() == [
        {"docno": "007", "title": "Bond", "text": "line one\nline two", "score": 1.5},
        {"docno": "042", "title": "", "text": "no title", "score": 2.0},
    ]


def test_one_split_per_file(tmp_path):
    (tmp_path / "a.csv").write_text("_id,text\na1,x\na2,y\n")
    (tmp_path / "b.csv").write_text("_id,text\nb1,z\n")
    op = create("sources.csv", {"path": str(tmp_path)})
    assert len(op.splits()) == 2
    assert [d for s in op.splits() for t in op.read(s) for d in t.column("docno").to_pylist()] == ["a1", "a2", "b1"]


def test_missing_file_missing_column_and_bad_csv(tmp_path):
    with pytest.raises(SourceNotFoundError, match="nothing.csv"):
        create("sources.csv", {"path": str(tmp_path / "nothing.csv")})(pa.table({}))
    (tmp_path / "a.csv").write_text("_id,body\na1,x\n")
    with pytest.raises(SourceError, match="no text column 'text'"):
        create("sources.csv", {"path": str(tmp_path / "a.csv")})(pa.table({}))
    (tmp_path / "ragged.csv").write_text("_id,text\na1,x,extra\n")
    with pytest.raises(SourceError, match="ragged.csv: cannot parse as CSV"):
        create("sources.csv", {"path": str(tmp_path / "ragged.csv")})(pa.table({}))


def test_bad_params_name_the_field(sample_csv):
    with pytest.raises(ParamsError) as err:
        create("sources.csv", {"path": str(sample_csv), "delimiter": ";;"})
    assert err.value.field == "params.delimiter"
