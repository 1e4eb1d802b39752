"""preprocess.dedup: contract, first occurrence kept in order, content normalisation, real corpora."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import MissingColumnsError, ParamsError
from operators.registry import create
from operators.testing import OperatorContract, sample_documents


class TestDedupContract(OperatorContract):
    operator_name = "preprocess.dedup"


class TestContentDedupContract(OperatorContract):
    operator_name = "preprocess.dedup"

    def make_operator(self, **params):
        return create(self.operator_name, {"key": "content", **params})


def test_docno_keeps_first_occurrence_in_order():
    table = pa.table({"docno": ["b", "a", "b", "c", "a", None, None], "n": [0, 1, 2, 3, 4, 5, 6]})
    out = create("preprocess.dedup", {})(table)
    assert out.column("docno").to_pylist() == ["b", "a", "c", None, None]  # rows without id are all kept
    assert out.column("n").to_pylist() == [0, 1, 3, 5, 6]


def test_content_ignores_case_spacing_and_unicode_form_but_not_the_rest():
    opening = "The honey bee is a eusocial flying insect within the genus Apis of the bee clade, all native to "
    table = pa.table({
        "docno": ["d1", "d2", "d3", "d4", "d5", "d6"],
        "title": ["Honey bee", "HONEY  BEE", "Honey bee", "Other", "Honey bee", None],
        "text": [opening + "mainland Afro-Eurasia.", " the HONEY bee is a eusocial\nflying insect within the genus "
                 "Apis of the bee clade, all native to mainland Afro-Eurasia. ", opening + "somewhere else.",
                 opening + "mainland Afro-Eurasia.", "ﬁve", None],
    })
    out = create("preprocess.dedup", {"key": "content"})(table)
    # d2 repeats d1; d3 shares the first 100 characters but differs after; d4 has another title
    assert out.column("docno").to_pylist() == ["d1", "d3", "d4", "d5", "d6"]
    twice = pa.table({"title": ["a", "a"], "text": ["ﬁve", "five"]})  # NFKC folds the ligature
    assert create("preprocess.dedup", {"key": "content"})(twice).num_rows == 1


def test_content_without_title_column():
    table = pa.table({"text": ["same", "Same ", "other"]})
    assert create("preprocess.dedup", {"key": "content"})(table).column("text").to_pylist() == ["same", "other"]


def test_sample_corpus_read_twice_is_deduplicated():
    docs = sample_documents(200)
    out = create("preprocess.dedup", {})(pa.concat_tables([docs, docs.slice(50, 100), docs]))
    assert out.equals(docs)


@pytest.mark.data
def test_scifact_concatenated_twice(shared_data):
    corpus = create("sources.beir", {"folder": str(shared_data / "scifact")})(pa.table({}))
    doubled = pa.concat_tables([corpus, corpus])
    for key in ("docno", "content"):  # SciFact has no duplicate abstracts: both keys give the corpus back
        assert create("preprocess.dedup", {"key": key})(doubled).equals(corpus)


def test_missing_column_and_bad_params():
    with pytest.raises(MissingColumnsError, match="docno"):
        create("preprocess.dedup", {})(pa.table({"text": ["x"]}))
    with pytest.raises(ParamsError) as err:
        create("preprocess.dedup", {"key": "url"})
    assert err.value.field == "params.key"
