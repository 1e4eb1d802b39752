"""retrieve.multi_hop's title links: the dictionary lookup, and follow_up: links / question_links over a real index
whose bridge document shares no word with the question."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.registry import create
from operators.retrieve.multi_hop_links import TitleLinks, title_links
from operators.testing import OperatorContract, sample_queries

DOCS = [  # d2 is the bridge: only d1's text names it ("Shirley Temple"), the question does not
    ("d1", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 comedy in which Shirley Temple plays Corliss Archer."),
    ("d2", "Shirley Temple", "An actress and later a diplomat, Chief of Protocol of the United States."),
    ("d3", "Corliss Archer", "A radio program about a teenage girl, Corliss Archer, from the Golden Age."),
    ("d4", "Temple", "A building for worship."),
    ("d5", "1945", "A year."),
]


@pytest.fixture(scope="module")
def linked_index(tmp_path_factory):
    from operators.store import Index, IndexSettings

    ids, titles, texts = zip(*DOCS)
    index = Index.create(tmp_path_factory.mktemp("links") / "index", IndexSettings(dense=False))
    index.commit([index.write_shard("a", pa.table({"docno": ids, "doc_id": ids, "title": titles, "text": texts}))])
    return index


def test_a_text_links_the_titles_it_names_as_whole_words_leftmost_longest():
    links = TitleLinks(["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e"],
                       ["Shirley Temple", "Kiss and Tell (1945 film)", "Temple", "1945", "Tell"])
    text = "In 1945 Shirley Temple starred in Kiss and Tell; a temple, the temples of Templeton."
    # leftmost-longest: "Shirley Temple" and "Kiss and Tell" hold their words; a bare year is no link
    assert links.find(text) == ["a", "b", "c"]
    assert links.find(None) == [] and links.find("nothing named") == []


def test_a_document_is_linked_once_by_its_first_chunk():
    links = TitleLinks(["x#0", "x#1", "y"], ["x", "x", None], ["Walden", "Walden", "Walden"])
    assert links.find("Walden Pond") == ["x#0", "y"]


def test_the_dictionary_follows_the_index_generation(linked_index):
    first = title_links(linked_index)
    assert title_links(linked_index) is first
    assert first.find("Corliss Archer met Shirley Temple") == ["d3", "d2"]
    generation, table = linked_index.columns(["docno", "title"])
    assert generation == linked_index.generation and table.num_rows == len(DOCS)


def test_links_bring_the_bridge_document_into_the_top_ranks(linked_index):
    asked = pa.table({"qid": ["q"], "query": ["What position did the star of the comedy Kiss and Tell hold?"]})
    params = {"index": str(linked_index.path), "retriever": "bm25", "k": 5, "documents_per_hop": 1, "dedup": False,
              "rrf_k": 5}
    single = create("retrieve.bm25", {"index": str(linked_index.path), "k": 5}, step_id="bm25")(asked)
    assert "d2" not in single.column("docno").to_pylist()  # no word of the question is in it
    out = create("retrieve.multi_hop", {**params, "follow_up": "links"}, step_id="hops")(asked)
    rows = {r["docno"]: r for r in out.to_pylist()}
    assert rows["d1"]["rank"] == 1 and rows["d1"]["hop"] == 1
    assert rows["d2"]["hop"] == 2 and rows["d2"]["rank"] <= 3
    assert out.column("rank").to_pylist() == list(range(1, out.num_rows + 1))


def test_question_links_rank_the_documents_the_question_names(linked_index):
    asked = pa.table({"qid": ["q"], "query": ["Which came first, Kiss and Tell or Corliss Archer on the radio?"]})
    params = {"index": str(linked_index.path), "retriever": "bm25", "k": 5, "max_hops": 1, "rrf_k": 5}
    plain = create("retrieve.multi_hop", params, step_id="hops")(asked)
    named = create("retrieve.multi_hop", {**params, "question_links": True}, step_id="hops")(asked)
    top = named.filter(pc.less_equal(named.column("rank"), 2)).column("docno").to_pylist()
    assert sorted(top) == ["d1", "d3"]
    assert set(named.column("hop").to_pylist()) == {1}
    assert named.column("score").to_pylist() != plain.column("score").to_pylist()


@pytest.mark.integration  # over the ingested sample index
class TestMultiHopLinksContract(OperatorContract):
    """The operator contract with title links (an empty table, one qid, several, ranks from 1...)."""

    operator_name = "retrieve.multi_hop"

    @pytest.fixture(autouse=True)
    def _index(self, sample_index):
        self.index = sample_index

    def make_operator(self, **params):
        return create(self.operator_name, {"index": str(self.index), "retriever": "bm25", "k": 6,
                                           "follow_up": "links", "question_links": True, "dedup": False, **params},
                      step_id="hops")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return sample_queries(n_queries)
