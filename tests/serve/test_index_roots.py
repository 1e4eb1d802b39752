"""A request may only name indices under the service's index roots: the service's own request preparation
(``Service.prepare``, what every flow route calls first) on real folders and symlinks; nothing runs, so no Ray."""

from __future__ import annotations

import os

import pytest

from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve


@pytest.fixture
def service(tmp_path, monkeypatch):
    """A Service whose default index is ``workspace/.tessera/indices/sample`` and whose home has ``indices/news``;
    ``outside/secret`` is an index-shaped folder elsewhere, and ``indices/escape`` a symlink to it."""
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    for folder in (home / "indices" / "news", workspace / ".tessera" / "indices" / "sample",
                   tmp_path / "outside" / "secret"):
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")  # what makes a folder an index, for the service's first check
    (home / "indices" / "escape").symlink_to(tmp_path / "outside" / "secret")
    (home / "indices" / "alias").symlink_to(home / "indices" / "news")
    monkeypatch.setenv("TESSERA_HOME", str(home))
    monkeypatch.chdir(workspace)
    args = ServiceArgs(default_index=".tessera/indices/sample", task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [], "tessera")


def refused(service: Service, body: dict) -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare(body, "local", search=True)
    assert err.value.status == 422 and err.value.code == "index_not_allowed"
    return err.value


def test_indices_under_the_roots_are_served(service, tmp_path):
    for index in ("news", "alias", str(tmp_path / "home" / "indices" / "news"), ".tessera/indices/sample",
                  "./.tessera/indices/../indices/sample", None):
        prepared = service.prepare({"flow": "bm25", "query": "q", "index": index}, "local", search=True)
        assert os.path.isabs(prepared.spec.steps["bm25"].params["index"])


@pytest.mark.parametrize("index", ["/etc", "/", "..", "../outside/secret", ".tessera/indices/../../../outside/secret",
                                   "escape", "news/../../../outside/secret", "~", "/proc/self/cwd"])
def test_indices_elsewhere_are_a_422_naming_the_field(service, index):
    error = refused(service, {"flow": "bm25", "query": "q", "index": index})
    assert error.param == "index" and "outside the folders" in error.message


def test_an_index_in_a_step_of_an_inline_or_mosaic_spec_is_confined_too(service, tmp_path):
    secret = str(tmp_path / "outside" / "secret")
    inline = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": secret}}}}
    assert refused(service, {"flow": inline, "query": "q"}).param == "steps.bm25.params.index"
    collections = {"steps": {"multi": {"op": "retrieve.multi_collection", "params": {"collections": [
        {"name": "ok", "index": "news"}, {"name": "bad", "index": "escape"}]}}}}
    assert refused(service, {"flow": collections, "query": "q"}).param == "steps.multi.params.collections.1.index"
    with pytest.raises(ApiError) as err:
        service.prepare({"query": "q", "1": {"id": "bm25", "parameters": {"index": "/etc"}}}, "local")
    assert err.value.param.endswith("params.index")


@pytest.mark.parametrize("name", ["../../serve/config", "../specs/rag", "rag/../rag", "/etc/hosts", "rag\x00"])
def test_a_flow_name_with_a_path_in_it_names_no_flow(service, name):
    """Only built-in and saved flows by name: a relative path must not load another YAML file of the server."""
    from operators.errors import SpecError

    with pytest.raises(SpecError) as err:
        service.prepare({"flow": name, "query": "q"}, "local", search=True)
    assert err.value.field == "flow" and "no flow named" in str(err.value)


def test_a_search_for_an_unknown_flow_lists_the_flows_that_search_and_a_task_lists_them_all(service):
    """``ingest``'s flows read documents, which a search refuses: they are no choice to offer it."""
    from operators.errors import SpecError

    with pytest.raises(SpecError) as err:
        service.prepare({"flow": "hybird", "query": "q"}, "local", search=True)
    assert "hybrid" in str(err.value) and "ingest" not in str(err.value)
    with pytest.raises(SpecError) as err:
        service.prepare({"flow": "hybird", "queries": ["q"]}, "local")
    assert "ingest, ingest_dimensions" in str(err.value)


def test_a_flow_files_spec_is_parsed_once_per_version_of_the_file(service):
    """``load_spec`` keeps the parsed spec of a file's version (parsing YAML was 5 ms of a 40 ms search)."""
    from serve.runs.flow_resolution import load_spec

    file = service.flow_file("hybrid", "local")
    assert load_spec(file) is load_spec(file)


def test_configured_roots_replace_the_defaults_and_keep_the_default_index(service, tmp_path):
    args = ServiceArgs(default_index=".tessera/indices/sample", index_roots=[str(tmp_path / "outside")],
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    configured = Service(resolve(args, environ={}), [], "tessera")
    for index in (str(tmp_path / "outside" / "secret"), None):
        configured.prepare({"flow": "bm25", "query": "q", "index": index}, "local", search=True)
    assert refused(configured, {"flow": "bm25", "query": "q", "index": "news"}).param == "index"


def files_refused(service: Service, step: dict) -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare({"flow": {"steps": {"read": step}}, "query": "q"}, "local")
    assert err.value.status == 422 and err.value.code == "path_not_allowed"
    return err.value


@pytest.mark.parametrize("step", [
    {"op": "sources.jsonl", "params": {"path": "/etc/passwd"}},
    {"op": "sources.jsonl", "params": {"path": "../outside/secret/*.jsonl"}},
    {"op": "sources.csv", "params": {"path": "data/../../outside/x.csv"}},
    {"op": "sources.parquet", "params": {"path": "data/sample/*/../../../../etc/*.parquet"}},
    {"op": "sources.beir", "params": {"folder": "/proc/self"}},
    {"op": "sources.sql", "params": {"url": "sqlite:////etc/secrets.db", "table": "t"}},
    {"op": "sources.sql", "params": {"url": "postgresql://db.internal/corp", "table": "t"}},
    {"op": "retrieve.corpus_bm25", "params": {"corpus": "~/.ssh/id_rsa"}},
    {"op": "retrieve.chroma", "params": {"path": "/var/lib", "collection": "c"}},
    {"op": "rerank.colbert", "params": {"token_store": "/tmp"}},
    {"op": "retrieve.gold", "params": {"dataset": "/srv/private-set"}},
    {"op": "retrieve.run_file", "params": {"path": "/etc/passwd"}},
])
def test_a_step_may_not_read_files_outside_the_data_roots(service, step):
    """Sources, corpus files, vector stores and token stores read the server's files: a client could get them back
    as rows. The field named is the step's param."""
    name = next(iter(step["params"]))
    error = files_refused(service, step)
    assert error.param == f"steps.read.params.{name}" and "cannot be read" in error.message


@pytest.mark.parametrize("escape", ["..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fsecrets.db",
                                    "%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/secrets.db"])
def test_a_sqlite_url_may_not_climb_out_of_a_data_root_by_its_quoting(service, escape):
    """SQLAlchemy decodes a URL's %2F and %2E: the check read '..%2F..%2Fetc%2Fsecrets.db' under data/sample as
    one file's name there, and the source opened /etc/secrets.db."""
    from serve.indices.index_roots import REPO

    url = f"sqlite:///{REPO / 'data' / 'sample'}/{escape}"
    error = files_refused(service, {"op": "sources.sql", "params": {"url": url, "table": "t"}})
    assert error.param == "steps.read.params.url" and "outside the folders this service reads" in error.message


def test_the_bundled_sample_and_configured_data_roots_are_readable(service, tmp_path):
    from serve.indices.index_roots import REPO

    ok = [{"op": "sources.jsonl", "params": {"path": "data/sample/corpus.jsonl"}},
          {"op": "sources.jsonl", "params": {"path": str(REPO / "data" / "sample" / "*.jsonl")}},
          {"op": "retrieve.corpus_bm25", "params": {}},            # its default corpus is the sample
          {"op": "rerank.colbert", "params": {"token_store": "auto"}}]
    for step in ok:
        try:
            service.prepare({"flow": {"steps": {"read": step}}, "query": "q"}, "local")
        except ApiError as err:  # paths are checked first: a model this machine lacks (ColBERT untrained) comes after
            assert step["op"] == "rerank.colbert" and err.code == "model_not_found", err.message
    args = ServiceArgs(default_index=".tessera/indices/sample", data_roots=[str(tmp_path / "outside")],
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    configured = Service(resolve(args, environ={}), [], "tessera")
    configured.prepare({"flow": {"steps": {"read": {"op": "sources.jsonl", "params": {
        "path": str(tmp_path / "outside" / "secret" / "*.jsonl")}}}}, "query": "q"}, "local")
    files_refused(configured, ok[0])   # the configured roots replace the default


def test_a_file_param_left_unset_is_checked_and_a_relative_one_runs_where_it_was_checked(service, tmp_path,
                                                                                        monkeypatch):
    """Only a param the request set was checked (``retrieve.corpus_bm25``'s default corpus was opened from any
    working directory), and a relative path was checked in the repository when the working directory lacks it, then
    opened by the source in the working directory only (the task failed: 'does not exist')."""
    from serve.indices.index_roots import REPO

    monkeypatch.chdir(tmp_path)  # a service started elsewhere than the checkout
    prepared = service.prepare({"flow": {"steps": {"read": {"op": "sources.jsonl", "params": {
        "path": "data/sample/*.jsonl"}}}}, "query": "q"}, "local")
    assert prepared.spec.steps["read"].params["path"] == str(REPO / "data" / "sample" / "*.jsonl")
    prepared = service.prepare({"flow": {"steps": {"bm25": {"op": "retrieve.corpus_bm25"}}}, "query": "q"}, "local")
    assert prepared.spec.steps["bm25"].params["corpus"] == str(REPO / "data" / "sample" / "corpus.jsonl")
    args = ServiceArgs(default_index=".tessera/indices/sample", data_roots=[str(tmp_path / "outside")],
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    error = files_refused(Service(resolve(args, environ={}), [], "tessera"), {"op": "retrieve.corpus_bm25"})
    assert error.param == "steps.read.params.corpus", error.message


def test_an_installed_package_reads_no_files_by_default(tmp_path, monkeypatch):
    """Installed, the repository's place is site-packages, whose data/ is another package's (contractions' JSON
    files): the default data roots are the bundled sample's folder only in a checkout."""
    from serve.indices import index_roots

    assert index_roots.default_data_roots() == [str(index_roots.REPO / "data")]  # this checkout
    site = tmp_path / "site-packages"
    (site / "data").mkdir(parents=True)
    (site / "data" / "contractions_dict.json").write_text("{}")
    monkeypatch.setattr(index_roots, "REPO", site)
    assert index_roots.default_data_roots() == []
