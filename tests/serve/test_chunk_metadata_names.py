"""A JSON document's metadata named like a chunker column (``chunk_id``, ``chunk_index``, ``total_chunks``) is a 422
naming the field, through the FastAPI app on uvicorn without Ray: ingestion used to drop such a field with a log
line the uploader never saw. One rule (``operators.metadata_columns``) for every column the ingest writes itself."""

from __future__ import annotations

import re

import pytest
import requests

from flows.ingestion.column_types import OWN_COLUMNS
from operators.metadata_columns import is_metadata_name
from tests.serve.conftest import api_on_localhost
from tests.text_checks import TRACEBACK


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    tmp = tmp_path_factory.mktemp("chunk_names")
    patch = pytest.MonkeyPatch()
    patch.setenv("TESSERA_HOME", str(tmp / "home"))
    (tmp / "home" / "indices" / "news").mkdir(parents=True)
    (tmp / "home" / "indices" / "news" / "manifest.json").write_text("{}")
    args = ServiceArgs(default_index=str(tmp / "home" / "indices" / "news"), task_store=f"sqlite:///{tmp / 't.db'}")
    Service(resolve(args, environ={}), [], "tessera").warming.join(timeout=120)
    with api_on_localhost() as url:
        yield url
    patch.undo()


@pytest.mark.parametrize("name", ["chunk_id", "chunk_index", "total_chunks"])
def test_a_chunker_column_as_metadata_is_a_422_naming_it(base, name):
    body = {"documents": [{"id": "bees", "text": "honey bees make honey", "metadata": {"source": "a", name: 3}}]}
    answer = requests.post(f"{base}/v1/indices/fresh/documents", json=body, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == f"documents.0.metadata.{name}" and f"documents.0.metadata.{name}: " in error["message"]
    assert f"'{name}'" in error["message"], error
    assert TRACEBACK not in answer.text


def test_every_column_the_ingest_writes_itself_is_refused_as_a_metadata_name():
    """``OWN_COLUMNS`` is what ingestion drops from a source: a name of it that a metadata field could otherwise
    take must be refused at upload, where the uploader hears of it."""
    plain = [c for c in OWN_COLUMNS if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", c)]
    assert plain and not [c for c in plain if is_metadata_name(c)]
    assert is_metadata_name("page") and is_metadata_name("chunk")  # a JSON document's own fields stay allowed


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", str(2**70), str(-(2**63) - 1)])
def test_a_metadata_value_a_column_cannot_keep_is_a_422_naming_it(base, value):
    """NaN, infinities and 1e400 were stored as NaN and listed and found as null; 2**70 became the string of its
    digits, so that the next upload's 5 failed its task with a type clash."""
    body = '{"documents": [{"id": "n1", "text": "x", "metadata": {"ok": 1, "m": %s}}]}' % value
    answer = requests.post(f"{base}/v1/indices/fresh/documents", data=body, timeout=60,
                           headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == "documents.0.metadata.m" and "documents.0.metadata.m: metadata value" in error["message"]
    # the edge of the range is taken (an accepted upload needs Ray)
    from serve.indices.documents import DocumentsRequest

    for edge in (2**63 - 1, -(2**63)):
        assert DocumentsRequest.model_validate_json(body.replace(value, str(edge))).documents[0].metadata["m"] == edge


@pytest.mark.parametrize("name, value", [("score_bm25", 5), ("rank_dense", 1), ("score_card", "gold")])
def test_a_metadata_name_of_a_search_score_or_rank_is_refused_and_nothing_is_queued(upload_service, name, value):
    """A ranking step's ``score_<step>``/``rank_<step>`` columns are the data model's (float, int32): a document
    uploaded with ``score_bm25: 5`` (an integer) or ``score_card: "gold"`` was accepted, and from its commit on every
    search of its index failed with a 500 (``transform wrote a column of another type than the data model's``). Now
    it is a 422 naming the field (a CSV column so named is left out, said in a warning), and the index searches on."""
    from serve.indices.documents import files_request
    from serve.service_settings import Limits
    from tests.serve.conftest import run_search, uploaded_index

    uploaded_index(upload_service, "notes")  # a BM25 index of bees and ants, uploaded by the key
    tasks = len(upload_service.store.list_tasks("local"))
    body = {"documents": [{"id": "wasps", "text": "wasps eat insects", "metadata": {"year": 2020, name: value}}]}
    with api_on_localhost() as base:
        answer = requests.post(f"{base}/v1/indices/notes/documents", json=body, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == f"documents.0.metadata.{name}" and "starting with score_ or rank_" in error["message"]
    hits = run_search({"flow": "bm25", "query": "honey bees", "index": "notes"}, "local")["results"][0]["hits"]
    assert [hit["docno"] for hit in hits] == ["bees#0"] and len(upload_service.store.list_tasks("local")) == tasks
    csv = f"id,text,{name}\nants,ants farm aphids,{value}\n".encode()
    request, _, warnings = files_request([("ants.csv", csv)], None, False, None, Limits())
    assert request.documents[0].metadata == {} and warnings[0].startswith(f"ants.csv: column(s) {name} left out")


def test_an_index_that_holds_a_score_or_rank_column_already_is_searched_and_filtered_on_it(make_service):
    """An index written before uploads and ``tessera ingest`` left such fields out (a document's ``score_dense: 5``,
    ``score_card: "gold"``) failed every search with a 500; a hit now leaves those columns out (it has its own
    scores), and a filter still reads them."""
    import pyarrow as pa

    from tests.serve.conftest import two_document_index

    service = make_service()
    two_document_index(service.indices.folder / "older", score_dense=pa.array([5, 1]),
                       score_card=pa.array(["gold", "lead"]), rank_bm25=pa.array([7, 8]))
    with api_on_localhost() as base:
        answer = requests.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey bees", "index": "older"},
                               timeout=60)
        assert answer.status_code == 200, answer.text
        [hit] = answer.json()["results"][0]["hits"]
        assert (hit["docno"], hit["rank_bm25"], isinstance(hit["score_bm25"], float)) == ("bees#0", 1, True), hit
        assert not {"score_dense", "score_card"} & set(hit), hit
        body = {"flow": "bm25", "query": "honey ants", "index": "older",
                "params": {"bm25.filter": {"field": "score_card", "eq": "lead"}}}
        filtered = requests.post(f"{base}/v1/search", json=body, timeout=60)
        assert filtered.status_code == 200, filtered.text
        assert [h["docno"] for h in filtered.json()["results"][0]["hits"]] == ["ants#0"]
