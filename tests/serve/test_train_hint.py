"""The command a 404 ``model_not_found`` gives to make a trained model names its dataset by a stand-in
(``--dataset <path-to-scifact>``), not the recipe's ``../shared/data/scifact``, the clone's layout on the machine
that wrote it, which a client of the service (or a user elsewhere) does not have. ``tessera run`` keeps the path
where that folder is there. The service's FastAPI app under uvicorn on 127.0.0.1 (no Ray: the refusal comes before a
task starts)."""

from __future__ import annotations

import requests


def test_a_missing_trained_model_is_made_with_a_command_naming_no_path_of_the_clone(base):
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
             "ce": {"op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"}}}
    for route in ("/v1/search", "/task/run"):
        answer = requests.post(base + route, json={"flow": {"steps": steps}, "query": "honey bees"}, timeout=120)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "model_not_found", answer.text
        message = answer.json()["error"]["message"]
        assert ("'tessera-cross-encoder' for flow flow, step ce (params.model): make it with: tessera train "
                "--dataset <path-to-scifact> --model cross-encoder") in message, message
        assert "shared" not in message, message


def test_the_command_names_the_recipes_dataset_only_where_its_folder_is(tmp_path, monkeypatch):
    from flows.train.recipe import train_command

    monkeypatch.chdir(tmp_path)  # no ../shared/data/scifact from here
    assert train_command("tessera-cross-encoder") == "tessera train --dataset <path-to-scifact> --model cross-encoder"
    (tmp_path / "clone").mkdir()
    (tmp_path / "shared" / "data" / "scifact").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "clone")
    assert train_command("tessera-cross-encoder") == ("tessera train --dataset ../shared/data/scifact "
                                                      "--model cross-encoder")
    assert train_command("tessera-cross-encoder", placeholder=True).startswith("tessera train --dataset <path-to-")
