"""``GET /flows`` says of each flow whether this service can run it, and why not in the words the run's refusal would
use: the API on uvicorn beside a real ``Service`` (no Ray: a refused flow never runs), its flows real files."""

from __future__ import annotations

import shutil

import pytest
import requests

from flows import store as flow_store
from serve.security import auth
from serve.chat.chat_flows import flow_cards
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.integration  # the ingested sample is the default index

QUERY = "which insects make honey"
#: A reranker whose model is neither served by the app nor on this machine.
MISSING_MODEL = "no-such-cross-encoder"


@pytest.fixture
def api(tmp_path, monkeypatch, sample_index):
    """The API without keys (the ``local`` tenant) on uvicorn, beside a service over the sample index that serves no
    model deployment; its steps may read files under ``tmp_path / "data"`` too."""
    from serve.indices.index_roots import default_data_roots
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    (tmp_path / "data").mkdir()
    service = Service(resolve(ServiceArgs(default_index=str(sample_index),
                                          task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                                          data_roots=[*default_data_roots(), str(tmp_path / "data")],
                                          spare_task_workers=0), environ={}), [], "tessera")
    auth.configure({}, None, None)
    with api_on_localhost() as base:
        yield base
    service.pruner.stop()


def test_every_flow_has_a_status_and_one_that_cannot_run_says_why_as_its_refusal_does(api):
    reranked = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
                          "rerank": {"op": "rerank.cross_encoder", "params": {"model": MISSING_MODEL},
                                     "inputs": ["bm25"]}}}
    for name, spec in (("mine_missing_model", reranked), ("mine_bm25", {"steps": {"bm25": {"op": "retrieve.bm25"}}})):
        assert requests.put(f"{api}/flows/{name}", json=spec, timeout=30).status_code == 201
    listing = requests.get(f"{api}/flows", timeout=60).json()

    assert listing["builtin"] == flow_store.builtin_names()  # the keys clients read before, as they were
    assert listing["saved"] == ["mine_bm25", "mine_missing_model"]
    assert list(listing["status"]) == listing["builtin"] + listing["saved"]
    status = listing["status"]
    for runnable in ("bm25", "hybrid", "rag", "ingest", "mine_bm25"):
        assert status[runnable] == {"runnable": True, "reason": None}, runnable
    for name, code in (("rag_gold", "invalid_spec"), ("mine_missing_model", "model_not_found")):
        assert status[name]["runnable"] is False
        refused = requests.post(f"{api}/v1/search", json={"flow": name, "query": QUERY}, timeout=60)
        assert refused.status_code in (404, 422) and refused.json()["error"]["code"] == code, refused.text
        assert status[name]["reason"] == refused.json()["error"]["message"]
    assert "steps.gold.params.dataset" in status["rag_gold"]["reason"]  # what rag_gold lacks: a benchmark's dataset
    assert MISSING_MODEL in status["mine_missing_model"]["reason"]


def test_a_flow_saved_again_gets_the_status_of_its_new_spec(api):
    broken = {"steps": {"bm25": {"op": "retrieve.bm25"}, "rerank": {"op": "rerank.cross_encoder", "inputs": ["bm25"],
                                                                    "params": {"model": MISSING_MODEL}}}}
    requests.put(f"{api}/flows/mine", json=broken, timeout=30).raise_for_status()
    assert requests.get(f"{api}/flows", timeout=60).json()["status"]["mine"]["runnable"] is False
    requests.put(f"{api}/flows/mine", json={"steps": {"bm25": {"op": "retrieve.bm25"}}}, timeout=30).raise_for_status()
    assert requests.get(f"{api}/flows", timeout=60).json()["status"]["mine"] == {"runnable": True, "reason": None}


def test_chat_lists_an_answering_flow_it_cannot_run_as_missing_for_the_reason_flows_gives(api):
    """``GET /v1/models``'s flows (what chat clients list) and ``GET /flows`` judge a flow by the same rule: an
    answering flow whose reranker's model is not here is ``missing`` there too, with the same reason."""
    answering = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
                           "rerank": {"op": "rerank.cross_encoder", "params": {"model": MISSING_MODEL}},
                           "context": {"op": "generate.context"},
                           "answer": {"op": "generate.answer", "params": {"model": "local"}}}}
    requests.put(f"{api}/flows/mine_answers", json=answering, timeout=30).raise_for_status()
    reason = requests.get(f"{api}/flows", timeout=60).json()["status"]["mine_answers"]["reason"]
    cards = {card.id: card for card in flow_cards(auth.LOCAL_TENANT)}  # /v1/models' flows (its route needs Serve)
    assert MISSING_MODEL in reason
    assert (cards["mine_answers"].status, cards["mine_answers"].reason) == ("missing", reason)
    assert cards["rag"].status == "ready" and cards["rag_gold"].status == "missing"


def test_a_model_folder_made_or_deleted_while_the_app_serves_changes_the_status(api, tmp_path, untrained_ce):
    """A flow naming its cross-encoder by a path below the model repository's folder (whose own version the status
    watches, but not its subfolders') is missing until that checkpoint is copied there while the app serves, and
    missing again once it is deleted: the status is not kept from before."""
    checkpoints = tmp_path / "home" / "models" / "checkpoints"
    checkpoints.mkdir(parents=True)
    folder = checkpoints / "late-ce"
    spec = {"steps": {"bm25": {"op": "retrieve.bm25"}, "rerank": {"op": "rerank.cross_encoder", "inputs": ["bm25"],
                                                                  "params": {"model": str(folder)}}}}
    requests.put(f"{api}/flows/mine_late", json=spec, timeout=30).raise_for_status()

    def status() -> dict:
        return requests.get(f"{api}/flows", timeout=60).json()["status"]["mine_late"]

    missing = status()
    assert missing["runnable"] is False and "model path 'late-ce' does not exist" in missing["reason"], missing
    assert str(tmp_path) not in missing["reason"]  # the model by its name, not the server's path
    shutil.copytree(untrained_ce, folder)
    assert status() == {"runnable": True, "reason": None}
    shutil.rmtree(folder)
    assert status() == missing


def test_a_saved_flow_that_names_a_file_outside_the_data_roots_says_so_as_its_run_would(api, tmp_path):
    """Saved flows were checked without the confinement a run applies, so one reading ``/etc/passwd`` was listed as
    runnable and then refused when asked."""
    outside = tmp_path / "corpus.jsonl"
    outside.write_text('{"_id": "d1", "text": "honey bees"}\n')
    spec = {"steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(outside), "k": 2}}}}
    assert requests.put(f"{api}/flows/outside", json=spec, timeout=30).status_code == 201
    status = requests.get(f"{api}/flows", timeout=60).json()["status"]["outside"]
    refused = requests.post(f"{api}/v1/search", json={"flow": "outside", "query": QUERY}, timeout=60)
    assert refused.status_code == 422 and status == {"runnable": False, "reason": refused.json()["error"]["message"]}


def test_a_flow_whose_corpus_file_is_missing_is_not_runnable_until_the_file_is_made(api, tmp_path):
    """``GET /flows`` listed a saved flow whose corpus file is not there as runnable; its search then failed at the
    step. Now both say so before anything runs, in the same words, and the status follows the file as it is made and
    deleted while the app serves (it is not cached with the flow's spec)."""
    corpus = tmp_path / "data" / "later.jsonl"
    spec = {"steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 2}}}}
    assert requests.put(f"{api}/flows/later", json=spec, timeout=30).status_code == 201

    def status() -> dict:
        return requests.get(f"{api}/flows", timeout=60).json()["status"]["later"]

    def search() -> requests.Response:
        return requests.post(f"{api}/v1/search", json={"flow": "later", "query": QUERY}, timeout=60)

    missing, refused = status(), search()
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["param"], error["code"]) == ("steps.bm25.params.corpus", "flow_not_runnable")
    assert "corpus file not found: later.jsonl" in error["message"] and str(tmp_path) not in error["message"]
    assert missing == {"runnable": False, "reason": error["message"]}

    corpus.write_text('{"_id": "d1", "text": "honey bees make honey"}\n')
    assert status() == {"runnable": True, "reason": None}
    found = search()
    assert found.status_code == 200 and found.json()["results"][0]["hits"][0]["docno"] == "d1", found.text
    corpus.unlink()
    assert status() == missing
