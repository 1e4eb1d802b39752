"""A queries file is read by its suffix: one without a suffix, or with one Tessera does not read, is refused naming
the file and the suffixes it reads."""

from __future__ import annotations

import pytest

from flows.queries import QUERY_SUFFIXES, read_queries
from operators.errors import SpecError


def refusal(path) -> str:
    with pytest.raises(SpecError) as err:
        read_queries(str(path))
    assert err.value.field == "queries"
    return err.value.message


def test_a_queries_file_without_a_suffix_is_said_to_have_none_with_the_suffixes_read(tmp_path):
    """``tessera run bm25 -q myq`` said "myq: unknown queries file type ''"."""
    queries = tmp_path / "myq"
    queries.write_text("honey bees\n", encoding="utf-8")
    assert refusal(queries) == (f"{queries}: the queries file has no suffix to say its type (use one of "
                                f"{', '.join(QUERY_SUFFIXES)})")


def test_a_queries_file_of_another_suffix_is_named_by_it(tmp_path):
    queries = tmp_path / "queries.xml"
    queries.write_text("<q>honey bees</q>\n", encoding="utf-8")
    assert refusal(queries).startswith(f"{queries}: unknown queries file type '.xml' (use one of .jsonl, ")
    (tmp_path / "queries.txt").write_text("honey bees\n", encoding="utf-8")
    assert read_queries(str(tmp_path / "queries.txt")).column("query").to_pylist() == ["honey bees"]
