"""sources.csv: contract, quoted newlines, ids kept as strings, one split per file."""

from __future__ import annotations

import gzip
import hashlib

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
    (tmp_path / "ragged.csv").write_text("_id,text\na1,x\na2,x,extra\n")
    with pytest.raises(SourceError, match=r"ragged.csv, line 3: 3 field\(s\) where the header has 2 \(_id, text\)"):
        create("sources.csv", {"path": str(tmp_path / "ragged.csv")})(pa.table({}))


def test_bad_rows_are_named_by_their_first_line_and_the_file_reads_on(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_bytes(b'_id,text,n\r\n'
                     b'r1,"two\r\nlines",1\r\n'          # lines 2-3: one record
                     b'r2,"stray" quote,2\r\n'            # line 4: text after a closing quote
                     b'\r\n'                              # line 5: blank, no record
                     b'r3,bad \xff byte,3\r\n'            # line 6
                     b'r4,fine,4\r\n'
                     b'r5,"never closed,5\r\nr6,swallowed,6\r\n')  # line 8 opens a quote, line 9 is a row
    op = create("sources.csv", {"path": str(path), "encoding": "utf-8"})  # given: no other one is guessed
    items = list(op.read_rows(str(path)))
    bad = [(b.line, b.reason.split(" (")[0]) for b in items if not isinstance(b, pa.Table)]
    assert bad == [(4, "not valid CSV"), (6, "not valid UTF-8"), (8, "a quote opened on line 8 is never closed")]
    docs = pa.concat_tables(t for t in items if isinstance(t, pa.Table))
    assert docs.to_pylist() == [{"docno": "r1", "title": "", "text": "two\nlines", "n": 1},
                                {"docno": "r4", "title": "", "text": "fine", "n": 4},
                                   {"docno": "r6", "title": "", "text": "swallowed", "n": 6}]
    at = op.read_rows_at(str(path), [9, 6, 3, 2])  # one pass, each row as read alone
    assert at[9].to_pylist() == [{"docno": "r6", "title": "", "text": "swallowed", "n": 6}]
    assert at[6].reason.startswith("not valid UTF-8 (byte 0xff at byte 8 of line 6)")
    assert at[3].reason == "no record of the file begins on line 3 now"
    assert {line: got.to_pylist() if isinstance(got, pa.Table) else got for line, got in at.items()} == {
        line: got.to_pylist() if isinstance(got, pa.Table) else got
        for line, got in ((line, op.read_rows_at(str(path), [line])[line]) for line in (9, 6, 3, 2))}
    with pytest.raises(SourceError, match=r"docs.csv, line 4: not valid CSV"):
        op(pa.table({}))
    stray = tmp_path / "stray.csv"  # q1's stray quote is closed by q2's: q2 is read again from its own line
    stray.write_text('_id,text\nq1,"stray\nq2,"quoted, text"\nq3,last\n')
    items = list(op.read_rows(str(stray)))
    assert [t.column("docno").to_pylist() if isinstance(t, pa.Table) else t.line for t in items] == [2, ["q2", "q3"]]
    assert "in a field quoted from line 2 to line 3" in items[0].reason
    limited = create("sources.csv", {"path": str(path), "limit": 2, "encoding": "utf-8"})  # 2 documents, bad rows
    assert [t.column("docno").to_pylist() if isinstance(t, pa.Table) else t.line
            for t in limited.read_rows(None)] == [["r1"], 4, 6, ["r4"]]


def test_bad_params_name_the_field(sample_csv):
    with pytest.raises(ParamsError) as err:
        create("sources.csv", {"path": str(sample_csv), "delimiter": ";;"})
    assert err.value.field == "params.delimiter"


def test_a_value_that_does_not_fit_its_column_names_the_column(tmp_path):
    """pyarrow names it by its 0-based number (`column #2`), which reads as the second column, `text`."""
    path = tmp_path / "years.csv"
    path.write_text("_id,text,year\na1,x,1999\na2,y,2000\na3,z,unknown\na4,w,2001\n")
    op = create("sources.csv", {"path": str(path), "batch_rows": 2})  # a1, a2 make year an integer column
    [bad] = [b for b in op.read_rows(str(path)) if not isinstance(b, pa.Table)]
    assert bad.line == 4
    assert bad.reason.startswith("a value does not fit its column (column 'year': CSV conversion error to int64: "
                                 "invalid value 'unknown'"), bad.reason


def test_quotes_read_as_text_with_quote_char_null(tmp_path):
    """Many TSV files never quote a field, and a text that opens with a quote broke its row (or swallowed the rest of
    the file); quote_char: null reads every quote as text, and the quoting error says so."""
    path = tmp_path / "passages.tsv"
    path.write_text('id\ttext\n1\t"Hello" he said\n2\ta 5" screen\n3\t"never closed\n4\tlast\n')
    quoted = create("sources.csv", {"path": str(path), "delimiter": "\t", "id_field": "id"})
    bad = [b for b in quoted.read_rows(str(path)) if not isinstance(b, pa.Table)]
    assert [b.line for b in bad] == [2, 4] and all("quote_char: null" in b.reason for b in bad)
    op = create("sources.csv", {"path": str(path), "delimiter": "\t", "id_field": "id", "quote_char": None})
    assert op(pa.table({})).column("text").to_pylist() == ['"Hello" he said', 'a 5" screen', '"never closed', "last"]
    assert op.read_rows_at(str(path), [4])[4].column("text").to_pylist() == ['"never closed']


def test_rows_read_again_together_keep_the_types_each_has_alone(tmp_path):
    """A retry reads a file's failed rows in one pass: each row's values are typed from it alone, as when each was
    read by itself (not by the rows before it, which would make a later row's value not fit), and a file that
    breaks is the reason of each row not read before it."""
    path = tmp_path / "mixed.csv"
    path.write_text('_id,text,n\na,one,7\nb,two,x\n')
    op = create("sources.csv", {"path": str(path)})
    got = op.read_rows_at(str(path), [3, 2, 9])
    assert got[2].to_pylist() == [{"docno": "a", "title": "", "text": "one", "n": 7}]
    assert got[3].to_pylist() == [{"docno": "b", "title": "", "text": "two", "n": "x"}]
    assert got[9].reason == "no record of the file begins on line 9 now"
    cut = tmp_path / "cut.csv.gz"  # a gzip cut short: the rows after where it breaks are not read
    rows = "".join(f"r{i},{hashlib.sha256(bytes(i)).hexdigest()}\n" for i in range(4000))
    whole = gzip.compress(f"_id,text\n{rows}".encode())
    cut.write_bytes(whole[:len(whole) // 2])
    alone = {line: op.read_rows_at(str(cut), [line])[line] for line in (2, 500, 3000, 3900)}
    assert alone[500].to_pylist()[0]["docno"] == "r498" and alone[3900] == alone[3000]
    assert alone[3000].reason.startswith("cannot read the file from line")
    got = op.read_rows_at(str(cut), [3900, 500, 3000, 2])
    assert {line: g.to_pylist() if isinstance(g, pa.Table) else g for line, g in got.items()} == {
        line: g.to_pylist() if isinstance(g, pa.Table) else g for line, g in alone.items()}


def test_lines_ending_with_a_carriage_return_alone_are_named_as_such(sample_csv, tmp_path):
    """Excel's 'CSV (Macintosh)' ends lines with a carriage return alone: the file was one "line", refused as a
    header that is "not valid CSV (new-line character seen in unquoted field ...)" with advice on quotes that did not
    apply. It says what the file is and how to convert it."""
    mac = tmp_path / "mac.csv"
    mac.write_bytes(sample_csv.read_bytes().replace(b"\r\n", b"\r").replace(b"\n", b"\r"))
    with pytest.raises(SourceError) as err:
        create("sources.csv", {"path": str(mac)})(pa.table({}))
    assert err.value.message == (
        f"{mac}: its lines end with a carriage return alone (as classic Mac OS wrote them: Excel's 'CSV (Macintosh)'), "
        "and CSV is read line by line: convert them to newlines (tr '\\r' '\\n' < FILE > NEW_FILE) and ingest that")
