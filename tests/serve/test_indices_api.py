"""Indices over real HTTP, beside the package's app: documents added by an ingestion task on Ray (MiniLM and BM25,
as `tessera ingest` builds them), found by a search that names the index, deleted again; one owner per index, one
ingestion at a time, and every refusal a 4xx naming its field, with nothing stored lost."""

from __future__ import annotations

import secrets
import time

import pytest
import requests

from serve.service_settings import key_hash

pytestmark = pytest.mark.ray

ALICE = "alice-" + secrets.token_hex(16)
BOB = "bob-" + secrets.token_hex(16)

DOCS = [
    {"id": "kakapo", "title": "Kakapo", "text": "The kakapo is a large flightless nocturnal parrot of New Zealand. "
     "It feeds on rimu fruit and breeds only in years when the rimu trees fruit heavily.",
     "metadata": {"source": "birds.txt", "year": 2019}},
    {"id": "takahe", "title": "Takahe", "text": "The takahe is a flightless swamphen of Fiordland, thought extinct "
     "until it was found again in the Murchison Mountains in 1948.", "metadata": {"source": "birds.txt", "year": 1948}},
]
MORE = [{"id": "weta", "title": "Weta", "text": "Giant weta are among the heaviest insects in the world; the "
         "Little Barrier Island weta can weigh more than a sparrow."}]


@pytest.fixture(scope="module")
def owners(serve_app, sample_index, tmp_path_factory):
    """An app with two keys (alice, bob) at /owners, beside the package's app."""
    from ray import serve

    from serve.app import build_app

    store = tmp_path_factory.mktemp("owners") / "tasks.db"
    args = {"api_deployment": "owners-api", "models": [], "service": {
        "default_index": str(sample_index), "task_store": f"sqlite:///{store}",
        "api_keys": [{"id": "alice", "sha256": key_hash(ALICE)}, {"id": "bob", "sha256": key_hash(BOB)}],
        "limits": {"max_documents_per_request": 3, "max_upload_bytes": 100_000}}}
    serve.run(build_app(args), name="owners", route_prefix="/owners", logging_config={"log_level": "WARNING"})
    try:
        yield serve_app + "/owners"
    finally:
        serve.delete("owners")


def call(base: str, method: str, path: str, key: str, **kwargs) -> requests.Response:
    return requests.request(method, base + path, headers={"Authorization": f"Bearer {key}"}, timeout=120, **kwargs)


def finished(base: str, key: str, task_id: str, timeout_s: float = 180) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        body = call(base, "GET", f"/task/progress/{task_id}", key).json()
        if body["has_finished"]:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.3)


def search(base: str, key: str, index: str, query: str, flow: str = "bm25") -> list[str]:
    response = call(base, "POST", "/v1/search", key, json={"flow": flow, "query": query, "index": index, "top_k": 3})
    assert response.status_code == 200, response.text
    return [hit["docno"] for hit in response.json()["results"][0]["hits"]]


def listed(base: str, key: str) -> dict[str, dict]:
    return {entry["name"]: entry for entry in call(base, "GET", "/v1/indices", key).json()["indices"]}


def error(response: requests.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


@pytest.fixture(scope="module")
def birds(owners) -> str:
    """Alice's index 'birds', made by her first upload."""
    added = call(owners, "POST", "/v1/indices/birds/documents", ALICE, json={"documents": DOCS})
    assert added.status_code == 202, added.text
    body = added.json()
    assert body["created"] and body["documents"] == 2 and body["spec"] == "ingest"
    task = finished(owners, ALICE, body["task_id"])
    assert task["status"] == "finished", task
    return "birds"


def test_an_upload_is_a_task_whose_documents_a_search_then_finds(owners, birds):
    task_id = listed(owners, ALICE)["birds"]["ingest_task"]
    task = finished(owners, ALICE, task_id)
    assert task["progress"]["pipeline_progress"] == "2/2"
    assert task["result"]["result_description"]["documents"] == 2
    assert task["result"]["aggregated_data"] == {"index": "birds", "documents": 2, "chunks": 2, "failures": 0}
    for flow in ("bm25", "dense", "hybrid"):
        assert search(owners, ALICE, birds, "flightless parrot that eats rimu fruit", flow)[0] == "kakapo#0", flow
    body = {"flow": "bm25", "query": "Murchison Mountains swamphen", "index": birds}
    # Private to its owner until shared: another key neither lists it nor searches it nor reads its documents.
    unshared = error(call(owners, "POST", "/v1/search", BOB, json=body), 403)
    assert (unshared["param"], unshared["code"]) == ("index", "index_not_shared")
    assert f"index '{birds}' belongs to another key" in unshared["message"]
    assert birds not in listed(owners, BOB)
    assert error(call(owners, "GET", f"/v1/indices/{birds}/documents", BOB), 403)["code"] == "index_not_shared"
    assert error(call(owners, "PATCH", f"/v1/indices/{birds}", BOB, json={"shared": True}), 403)["code"] \
        == "index_not_owned"
    shared = call(owners, "PATCH", f"/v1/indices/{birds}", ALICE, json={"shared": True})
    assert shared.json() == {"index": birds, "shared": True}, shared.text
    hit = call(owners, "POST", "/v1/search", BOB, json=body).json()["results"][0]["hits"][0]
    assert hit["docno"] == "takahe#0" and hit["doc_id"] == "takahe" and hit["year"] == 1948  # metadata columns
    mine, theirs = listed(owners, ALICE)["birds"], listed(owners, BOB)["birds"]
    assert mine["writable"] and mine["chunks"] == 2 and mine["encoder"] == "all-MiniLM-L6-v2" and mine["bm25"]
    assert not theirs["writable"] and theirs["ingest_task"] is None and theirs["chunks"] == 2 and theirs["shared"]
    default = [e for e in listed(owners, ALICE).values() if e["default"]]
    assert len(default) == 1 and not default[0]["writable"] and default[0]["chunks"] > 0


def test_a_second_upload_adds_and_ids_already_there_are_a_409(owners, birds):
    taken = call(owners, "POST", "/v1/indices/birds/documents", ALICE, json={"documents": [DOCS[0], *MORE]})
    err = error(taken, 409)
    assert err["code"] == "documents_exist" and "'kakapo'" in err["message"] and "'weta'" not in err["message"]
    assert (err["ids"], err["ids_total"]) == (["kakapo"], 1)  # what a client reads instead of the message
    added = call(owners, "POST", "/v1/indices/birds/documents", ALICE, json={"documents": MORE}).json()
    assert not added["created"] and finished(owners, ALICE, added["task_id"])["status"] == "finished"
    assert search(owners, ALICE, birds, "heaviest insects giant weta")[0] == "weta#0"
    assert listed(owners, ALICE)["birds"]["chunks"] == 3


def test_one_ingestion_at_a_time_per_index(owners):
    first = call(owners, "POST", "/v1/indices/queue/documents", ALICE, json={"documents": DOCS}).json()
    busy = call(owners, "POST", "/v1/indices/queue/documents", ALICE, json={"documents": MORE})
    err = error(busy, 409)
    assert err["code"] == "index_busy" and first["task_id"] in err["message"]
    assert finished(owners, ALICE, first["task_id"])["status"] == "finished"
    again = call(owners, "POST", "/v1/indices/queue/documents", ALICE, json={"documents": MORE})
    assert again.status_code == 202 and finished(owners, ALICE, again.json()["task_id"])["status"] == "finished"
    assert listed(owners, ALICE)["queue"]["chunks"] == 3


@pytest.mark.parametrize("name,body,status,field", [
    ("birds2", {"documents": []}, 422, "documents"),
    ("birds2", {"documents": [{"id": "a", "text": ""}]}, 422, "documents.0.text"),
    ("birds2", {"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, 422, "documents.1.id"),
    ("birds2", {"documents": [{"id": "a", "text": "x", "metadata": {"docno": "b"}}]}, 422,
     "documents.0.metadata.docno"),
    ("birds2", {"documents": [{"id": "a", "text": "x", "colour": "red"}]}, 422, "documents.0.colour"),
    ("birds2", {"documents": [{"id": str(i), "text": "x"} for i in range(4)]}, 422, "max_documents_per_request"),
    ("birds2", {"documents": [{"id": "a", "text": "x"}], "spec": "hybrid"}, 422, "spec"),
    (".hidden", {"documents": [{"id": "a", "text": "x"}]}, 422, "name"),
    ("x" * 65, {"documents": [{"id": "a", "text": "x"}]}, 422, "name"),
    ("a b", {"documents": [{"id": "a", "text": "x"}]}, 422, "name"),
])
def test_a_bad_upload_is_a_4xx_naming_the_field_and_makes_nothing(owners, name, body, status, field):
    response = call(owners, "POST", f"/v1/indices/{name}/documents", ALICE, json=body)
    err = error(response, status)
    assert err["param"] == field if "." in field else field in (err["param"], err["code"])
    assert field in err["message"]
    assert name not in listed(owners, ALICE)


def test_only_the_owner_changes_an_index_and_others_made_elsewhere_are_read_only(owners, birds, sample_index):
    for method, path, body in (("POST", "/v1/indices/birds/documents", {"documents": MORE}),
                               ("POST", "/v1/indices/birds/delete", {"ids": ["kakapo"]}),
                               ("DELETE", "/v1/indices/birds", None)):
        assert error(call(owners, method, path, BOB, json=body), 403)["code"] == "index_not_owned"
    spec = call(owners, "POST", "/v1/indices/birds/documents", ALICE,
                json={"documents": [{"id": "x", "text": "y"}], "spec": "ingest_static"})
    assert error(spec, 409)["param"] == "spec"
    assert error(call(owners, "DELETE", "/v1/indices/nothing-here", ALICE), 404)["code"] == "index_not_found"
    # The sample index (the default) was built by `tessera ingest`; one at $TESSERA_HOME/indices/<name> too.
    from operators.home import tessera_home

    made_elsewhere = tessera_home() / "indices" / "elsewhere"
    made_elsewhere.mkdir(parents=True)
    refused = call(owners, "POST", "/v1/indices/elsewhere/documents", ALICE, json={"documents": MORE})
    assert error(refused, 403)["code"] == "index_read_only" and list(made_elsewhere.iterdir()) == []
    assert "kakapo#0" in search(owners, ALICE, birds, "kakapo parrot")  # nothing of the refusals touched it


def test_documents_and_indices_deleted_and_a_name_made_again(owners):
    made = call(owners, "POST", "/v1/indices/gone/documents", ALICE, json={"documents": DOCS}).json()
    assert finished(owners, ALICE, made["task_id"])["status"] == "finished"
    assert search(owners, ALICE, "gone", "flightless swamphen Fiordland")[0] == "takahe#0"
    deleted = call(owners, "POST", "/v1/indices/gone/delete", ALICE, json={"ids": ["takahe", "moa"]}).json()
    assert deleted == {"index": "gone", "deleted": ["takahe"], "missing": ["moa"], "chunks": 1}
    assert "takahe#0" not in search(owners, ALICE, "gone", "flightless swamphen Fiordland")
    assert call(owners, "DELETE", "/v1/indices/gone", ALICE).json() == {"index": "gone", "deleted": True}
    assert "gone" not in listed(owners, ALICE)
    missing = call(owners, "POST", "/v1/search", ALICE, json={"flow": "bm25", "query": "kakapo", "index": "gone"})
    assert error(missing, 422)["param"] == "index" and "does not exist" in missing.json()["error"]["message"]
    # Made again under the same name (by the other key, now that it is free): replicas that searched the old one
    # see only the new documents.
    again = call(owners, "POST", "/v1/indices/gone/documents", BOB, json={"documents": MORE}).json()
    assert again["created"] and finished(owners, BOB, again["task_id"])["status"] == "finished"
    assert not listed(owners, BOB)["gone"]["shared"]  # the new index does not inherit the old one's sharing
    assert call(owners, "PATCH", "/v1/indices/gone", BOB, json={"shared": True}).status_code == 200
    assert search(owners, ALICE, "gone", "kakapo weta insects") == ["weta#0"]
    assert listed(owners, BOB)["gone"]["writable"] and not listed(owners, ALICE)["gone"]["writable"]


def test_pdf_text_and_markdown_files_become_documents_a_page_a_document(owners, pdf_writer, tmp_path):
    pdf = pdf_writer(tmp_path / "birds.pdf", [DOCS[0]["text"], "", DOCS[1]["text"]], title="Flightless birds")
    # The Markdown file first: its document has no page, and the pages after it must keep theirs.
    files = [("files", ("weta.md", f"# Weta\n\n{MORE[0]['text']}".encode(), "text/markdown")),
             ("files", ("birds.pdf", pdf.read_bytes(), "application/pdf"))]
    added = call(owners, "POST", "/v1/indices/papers/files", ALICE, files=files, data={"spec": "ingest"})
    assert added.status_code == 202, added.text
    assert added.json()["documents"] == 3  # two pages with text, the blank one skipped, and the Markdown file
    task = finished(owners, ALICE, added.json()["task_id"])
    assert task["status"] == "finished" and task["result"]["aggregated_data"]["chunks"] == 3, task
    hits = call(owners, "POST", "/v1/search", ALICE, json={"flow": "bm25", "query": "Murchison Mountains swamphen",
                                                           "index": "papers", "top_k": 1}).json()
    hit = hits["results"][0]["hits"][0]
    assert (hit["docno"], hit["path"], hit["page"], hit["title"]) == ("birds-p3#0", "birds.pdf", 3,
                                                                      "Flightless birds")
    assert search(owners, ALICE, "papers", "heaviest insects")[0] == "weta.md#0"


@pytest.mark.parametrize("name,content,words", [
    ("notes.pdf", b"plain text, not a PDF", "notes.pdf: cannot read as a PDF"),
    ("report.docx", b"PK\x03\x04", "'report.docx' is not a PDF, text, Markdown, HTML or CSV file"),
    ("binary.txt", bytes(range(128, 256)), "'binary.txt' is not UTF-8 text"),
    ("blank.pdf", None, "no page of 'blank.pdf' has a text layer"),
])
def test_a_file_that_gives_no_documents_is_a_422_naming_it(owners, pdf_writer, tmp_path, name, content, words):
    if content is None:
        content = pdf_writer(tmp_path / name, ["", ""]).read_bytes()
    refused = call(owners, "POST", "/v1/indices/refused/files", ALICE, files=[("files", (name, content))])
    err = error(refused, 422)
    assert err["param"] == "files" and words in err["message"]
    assert "refused" not in listed(owners, ALICE)


def test_an_upload_over_max_upload_bytes_is_a_413_naming_it(owners):
    big = [("files", ("big.txt", b"word " * 30_000))]
    err = error(call(owners, "POST", "/v1/indices/big/files", ALICE, files=big), 413)
    assert err["code"] == "max_upload_bytes" and "max_upload_bytes=100000" in err["message"]
    small = call(owners, "POST", "/v1/indices/big/documents", ALICE, json={"documents": [{"id": "a", "text": "b"}]})
    assert small.status_code == 202  # a JSON body keeps its own limit
    assert finished(owners, ALICE, small.json()["task_id"])["status"] == "finished"


def test_replace_swaps_documents_sent_again_as_json_or_as_files(owners, pdf_writer, tmp_path):
    made = call(owners, "POST", "/v1/indices/swaps/documents", ALICE, json={"documents": DOCS}).json()
    assert finished(owners, ALICE, made["task_id"])["status"] == "finished"
    changed = {**DOCS[0], "text": "The kakapo now also lives on Whenua Hou, a predator-free island."}
    again = call(owners, "POST", "/v1/indices/swaps/documents", ALICE, json={"documents": [changed], "replace": True})
    assert again.status_code == 202 and finished(owners, ALICE, again.json()["task_id"])["status"] == "finished"
    hits = call(owners, "POST", "/v1/search", ALICE, json={"flow": "bm25", "query": "kakapo", "index": "swaps"}).json()
    assert [h["text"] for h in hits["results"][0]["hits"] if h["doc_id"] == "kakapo"] == [changed["text"]]
    same = call(owners, "POST", "/v1/indices/swaps/documents", ALICE, json={"documents": DOCS[1:], "replace": True})
    described = finished(owners, ALICE, same.json()["task_id"])["result"]["result_description"]
    assert described["chunks_reused"] == 1 and "(1 kept their vectors: their text did not change)" in \
        described["text"], described  # sent again unchanged: not encoded again
    # a JSON document whose metadata names the file as its path is not the file's: sending the file again
    # with replace took it away without a word
    note = {"id": "guide-note", "text": "A note on the guide: it was printed for the kaka walk.",
            "metadata": {"path": "guide.pdf"}}
    noted = call(owners, "POST", "/v1/indices/swaps/documents", ALICE, json={"documents": [note]})
    assert finished(owners, ALICE, noted.json()["task_id"])["status"] == "finished"
    old = ["Old first page about moa bones.", "Old second page about kiwi eggs.", "Old third page about tui song."]
    for pages in (old, ["New first page about huia feathers."]):  # sent again with fewer pages
        pdf = pdf_writer(tmp_path / "guide.pdf", pages).read_bytes()
        sent = call(owners, "POST", "/v1/indices/swaps/files", ALICE, files=[("files", ("guide.pdf", pdf))],
                    data={"replace": "true"})
        assert sent.status_code == 202 and finished(owners, ALICE, sent.json()["task_id"])["status"] == "finished"
        assert listed(owners, ALICE)["swaps"]["chunks"] == 3 + len(pages)  # the JSON documents stay
    for gone in ("moa bones", "kiwi eggs", "tui song"):
        assert search(owners, ALICE, "swaps", gone) == [], gone
    assert search(owners, ALICE, "swaps", "huia feathers") == ["guide-p1#0"]
    assert search(owners, ALICE, "swaps", "kaka walk") == ["guide-note#0"]


def test_an_upload_embeds_on_the_apps_deployment_of_the_encoder(serve_app):
    """The package's app serves all-MiniLM-L6-v2: the ingestion task's embed step runs on that deployment (the
    task loads no model of its own), and the vectors it stores are the ones a dense search matches."""
    added = requests.post(serve_app + "/v1/indices/placed/documents", json={"documents": DOCS}, timeout=120)
    assert added.status_code == 202, added.text
    task = finished(serve_app, "", added.json()["task_id"])
    assert task["status"] == "finished", task
    assert "the encoder runs on Serve deployment 'tessera/all-MiniLM-L6-v2'" in task["progress"]["log"]
    assert search(serve_app, "", "placed", "flightless parrot that eats rimu fruit", "dense")[0] == "kakapo#0"
    assert search(serve_app, "", "placed", "swamphen thought extinct, found again in 1948", "dense")[0] == "takahe#0"


def test_a_cancelled_ingestion_leaves_no_upload_or_staging_behind(owners, tessera_home):
    """The clean-up runs once the killed worker is gone: in the cancel when ``stop`` saw it die, else when the
    replica's watcher sees its run end, so the folders are looked at until then (30 s at most). The lock file its
    killed run left goes too, also when a commit landed first and the index stays (``discard_stopped_upload``)."""
    added = call(owners, "POST", "/v1/indices/halted/documents", ALICE, json={"documents": DOCS}).json()
    cancelled = call(owners, "GET", f"/task/cancel/{added['task_id']}", ALICE)
    assert cancelled.status_code == 200, cancelled.text
    assert finished(owners, ALICE, added["task_id"])["status"] == "cancelled"
    uploads = tessera_home / "uploads" / "halted"  # removed with the first upload's empty index, its worker gone
    staging = tessera_home / "indices" / "halted" / "_ingest"

    def emptied(folder) -> bool:
        try:
            return not any(folder.iterdir())
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 30
    while not (emptied(uploads) and emptied(staging)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not uploads.exists() or list(uploads.iterdir()) == []
    assert not staging.exists() or list(staging.iterdir()) == []
    again = call(owners, "POST", "/v1/indices/halted/documents", ALICE, json={"documents": DOCS}).json()
    assert finished(owners, ALICE, again["task_id"])["status"] == "finished"  # the index takes the upload again
    assert listed(owners, ALICE)["halted"]["chunks"] == 2


def test_an_indexs_documents_are_listed_in_the_order_they_were_added_a_page_at_a_time(owners):
    made = call(owners, "POST", "/v1/indices/shelf/documents", ALICE, json={"documents": [*DOCS, *MORE]}).json()
    assert finished(owners, ALICE, made["task_id"])["status"] == "finished"
    assert error(call(owners, "GET", "/v1/indices/shelf/documents", BOB), 403)["code"] == "index_not_shared"
    call(owners, "PATCH", "/v1/indices/shelf", ALICE, json={"shared": True})
    whole = call(owners, "GET", "/v1/indices/shelf/documents", BOB)  # any key may read what it may search
    assert whole.status_code == 200, whole.text
    body = whole.json()
    assert (body["index"], body["total"], body["offset"]) == ("shelf", 3, 0)
    assert [(d["id"], d["title"], d["passages"]) for d in body["documents"]] == [
        ("kakapo", "Kakapo", 1), ("takahe", "Takahe", 1), ("weta", "Weta", 1)]
    assert body["documents"][0]["metadata"] == {"source": "birds.txt", "year": 2019}
    assert body["documents"][2]["metadata"] == {}  # weta has none; no nulls
    page = call(owners, "GET", "/v1/indices/shelf/documents?offset=1&limit=1", ALICE).json()
    assert (page["total"], [d["id"] for d in page["documents"]]) == (3, ["takahe"])
    assert error(call(owners, "GET", "/v1/indices/shelf/documents?limit=0", ALICE), 422)["param"] == "limit"
    assert error(call(owners, "GET", "/v1/indices/nowhere/documents", ALICE), 404)["code"] == "index_not_found"
    assert error(call(owners, "GET", "/v1/indices/no%20such/documents", ALICE), 422)["code"] == "invalid_index_name"
