"""analyze.word_count: contract and behaviour."""

import pyarrow as pa

from operators import create
from operators.testing import OperatorContract, sample_results


class TestWordCountContract(OperatorContract):
    operator_name = "analyze.word_count"


def test_counts_match_str_split_on_real_text():
    table = sample_results(3, 5)
    out = create("analyze.word_count")(table)
    assert out.column("word_count").to_pylist() == [len(t.split()) for t in table.column("text").to_pylist()]


def test_empty_null_and_unicode_whitespace():
    out = create("analyze.word_count", {"input_column": "t", "output_column": "n"})(
        pa.table({"t": ["", None, "  one  ", "a\u00a0b\tc\nd"]}))
    assert out.column("n").to_pylist() == [0, 0, 1, 4]
