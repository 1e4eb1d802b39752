"""The object repository builds each (name, params) once, even under concurrent callers; references resolve offline."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from operators.models import ModelNotFoundError, ObjectRepository, models_dir, resolve_model_path


def test_concurrent_callers_share_one_build():
    repo = ObjectRepository()
    builds = []

    def build():
        builds.append(threading.get_ident())
        time.sleep(0.2)  # long enough that every caller arrives while the first build runs
        return object()

    with ThreadPoolExecutor(8) as pool:
        key = {"path": "/m", "device": "cpu"}
        results = list(pool.map(lambda _: repo.get_or_create("model", key, build), range(8)))
    assert len(builds) == 1
    assert all(r is results[0] for r in results)


def test_a_slow_build_does_not_block_other_keys():
    repo = ObjectRepository()
    building, release = threading.Event(), threading.Event()

    def slow():
        building.set()
        release.wait(30)
        return "slow"

    with ThreadPoolExecutor(2) as pool:
        slow_future = pool.submit(repo.get_or_create, "model", {"path": "/slow"}, slow)
        assert building.wait(30)
        assert repo.get_or_create("model", {"path": "/fast"}, lambda: "fast") == "fast"
        assert not slow_future.done(), "a build for another key waited behind the slow one"  # it waits for release
        release.set()
        assert slow_future.result(30) == "slow"


def test_params_order_does_not_matter_and_delete_forgets():
    repo = ObjectRepository()
    first = repo.get_or_create("m", {"a": 1, "b": 2}, object)
    assert repo.get_or_create("m", {"b": 2, "a": 1}, object) is first
    assert repo.get_or_create("m", {"a": 1, "b": 3}, object) is not first
    assert len(repo) == 2
    assert repo.delete("m", {"a": 1, "b": 2}) is True
    assert repo.delete("m", {"a": 1, "b": 2}) is False
    assert repo.get_or_create("m", {"a": 1, "b": 2}, object) is not first


def test_a_failed_build_is_not_cached():
    repo = ObjectRepository()

    def broken():
        raise OSError("weights unreadable")

    with pytest.raises(OSError):
        repo.get_or_create("m", None, broken)
    assert repo.get_or_create("m", None, lambda: "ok") == "ok"


def test_trained_models_resolve_by_name_from_the_model_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    folder = models_dir() / "tessera-cross-encoder"
    with pytest.raises(ModelNotFoundError, match="tessera train"):
        resolve_model_path("tessera-cross-encoder")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert resolve_model_path("tessera-cross-encoder") == folder


def test_missing_references_fail_at_once_and_say_what_to_do(tmp_path):
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="nothing is downloaded"):
        resolve_model_path("cross-encoder/ms-marco-MiniLM-L-6-v2")  # a hub id that is not in the local cache
    assert time.perf_counter() - started < 5, "resolving a missing model must not wait on the network"
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model_path(str(tmp_path))


def test_packaged_model_resolves_under_its_aliases():
    path = resolve_model_path("all-MiniLM-L6-v2")
    assert (path / "config.json").is_file()
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2") == path == resolve_model_path("minilm")


def test_a_missing_path_says_it_does_not_exist_and_a_missing_name_lists_the_model_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError, match="which does not exist yet; tessera train"):
        resolve_model_path("tessera-cross-encoder")
    for name in ("tessera-bi-encoder", "hr-cross-encoder"):
        (models_dir() / name).mkdir(parents=True)
        (models_dir() / name / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError) as err:  # a misspelt name: what is there is in the message
        resolve_model_path("tessera-cross-encoder")
    assert "it holds hr-cross-encoder, tessera-bi-encoder; tessera train" in err.value.message
    assert err.value.message.startswith("model 'tessera-cross-encoder' is not a packaged model")
    for reference, shown in (("./models/mine", tmp_path / "models" / "mine"),
                             (str(tmp_path / "gone"), tmp_path / "gone"),
                             ("~/surely-not-a-model-folder", Path.home() / "surely-not-a-model-folder")):
        with pytest.raises(ModelNotFoundError) as err:
            resolve_model_path(reference)
        assert err.value.message.startswith(f"model path {shown} does not exist"), err.value.message
        assert "packaged model" not in err.value.message and "nothing is downloaded" in err.value.message
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model_path(str(tmp_path / "weights.bin"))
    assert err.value.message.startswith(f"model path {tmp_path / 'weights.bin'} is a file, not a model folder")
