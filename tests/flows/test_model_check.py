"""Every model a flow needs is checked before any work: tessera run, tessera bench and Flow.run
name every missing model with its flow, step and the tessera train command that makes it.

TESSERA_HOME is an empty folder, so no model trained by ``tessera train`` is there; MiniLM is
packaged and always is.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from flows.model_check import MissingModelsError, check_models, flow_needs
from flows.spec import FlowSpec
from operators.store import Index, IndexSettings

SPECS = Path(__file__).resolve().parents[2] / "flows" / "specs"
PACKAGED = {"all-MiniLM-L6-v2"}
#: How the commands name the recipes' dataset: its path from a clone beside ../shared/data, else a stand-in.
SCIFACT = "<path-to-scifact>" if not Path("../shared/data/scifact").is_dir() else "../shared/data/scifact"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    return tmp_path / "home"


@pytest.fixture
def nothing_runs(monkeypatch):
    """Executors and ingestion fail the test if anything starts."""
    from flows.executors.local import LocalExecutor

    def refuse(*args, **kwargs):
        raise AssertionError("work started before every model was checked")

    monkeypatch.setattr(LocalExecutor, "run", refuse)
    monkeypatch.setattr("flows.ingestion.ingest", refuse)
    monkeypatch.setattr("flows.ingestion.job._Run.ingest", refuse)


@pytest.fixture
def bi_encoder_index(tmp_path) -> Path:
    """An (empty) index whose chunks were embedded with tessera-bi-encoder, a model not on this machine."""
    return Index.create(tmp_path / "ft-index", IndexSettings(encoder="tessera-bi-encoder", dense=True)).path


def test_run_names_every_missing_model_with_its_step_and_train_command(home, bi_encoder_index, nothing_runs,
                                                                       capsys):
    from flows.commands import main

    assert main(["run", "hybrid_ce", "--index", str(bi_encoder_index), "--queries", "honey bees",
                 "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "2 model(s) needed are not on this machine, so nothing was run" in err
    assert ("'tessera-bi-encoder' for flow hybrid_ce, step dense (params.index (its encoder)): make it with: "
            f"tessera train --dataset {SCIFACT} --model bi-encoder") in err
    assert ("'tessera-cross-encoder' for flow hybrid_ce, step rerank (params.model): make it with: "
            f"tessera train --dataset {SCIFACT} --model cross-encoder") in err


def test_flow_run_checks_before_any_step(home, bi_encoder_index, nothing_runs):
    from flows.api import Flow

    with pytest.raises(MissingModelsError) as raised:
        Flow.load("hybrid_colbert", index=str(bi_encoder_index)).run("honey bees")
    assert {ref: [(n.flow, n.step) for n in needs] for ref, needs in raised.value.missing.items()} == {
        "tessera-bi-encoder": [("hybrid_colbert", "dense")], "tessera-colbert": [("hybrid_colbert", "rerank")]}
    assert "--model colbert" in str(raised.value)


def test_a_flow_made_for_another_encoders_index_is_refused_before_any_step(home, tmp_path, nothing_runs, capsys):
    """hybrid_ft is made for an index embedded with tessera-bi-encoder: on a MiniLM index its dense step would search
    with MiniLM, and the run would be hybrid's under hybrid_ft's name."""
    from flows.api import Flow
    from flows.commands import main
    from flows.model_check import IndexEncoderError

    from operators.models.references import models_dir, resolve_model_path

    minilm = Index.create(tmp_path / "minilm-index", IndexSettings(encoder="all-MiniLM-L6-v2", dense=True)).path
    assert main(["run", "hybrid_ft", "--index", str(minilm), "--queries", "honey bees", "--no-cache"]) == 2
    err = capsys.readouterr().err  # the model it is made for is not made yet: that first, with how to make it
    assert ("'tessera-bi-encoder' for flow hybrid_ft, step dense (index_settings.encoder: the index it is made for): "
            f"make it with: tessera train --dataset {SCIFACT} --model bi-encoder") in err, err
    minilm_files = shutil.ignore_patterns("*.safetensors", "*.bin")  # a model of that name: its config, no weights
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), models_dir() / "tessera-bi-encoder", ignore=minilm_files)
    assert main(["run", "hybrid_ft", "--index", str(minilm), "--queries", "honey bees", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert ("flow hybrid_ft is made for an index embedded with 'tessera-bi-encoder' (its index_settings.encoder), "
            "but step dense searches an index embedded with 'all-MiniLM-L6-v2'") in err
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), models_dir() / "tessera-static", ignore=minilm_files)
    with pytest.raises(IndexEncoderError, match="dense_static is made for an index embedded with 'tessera-static'"):
        Flow.load("dense_static", index=str(minilm)).run("honey bees")


def test_bench_names_every_model_of_every_flow_before_building_an_index(home, tmp_path, nothing_runs, capsys):
    from flows.commands import main

    dataset = tmp_path / "tiny"
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "Bees", "text": "honey bees"}) + "\n")
    (dataset / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "bees"}) + "\n")
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    indices, out = tmp_path / "indices", tmp_path / "out"
    assert main(["bench", "--dataset", str(dataset), "--flow", "bm25", "--flow", "ce=hybrid_ce", "--flow",
                 "hybrid_colbert", "--out", str(out), "--index-dir", str(indices), "--no-mlflow", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "3 model(s) needed" in err
    assert ("'tessera-bi-encoder' for flow ce, step dense (index_settings.encoder: the index built for it); "
            "flow hybrid_colbert, step dense (index_settings.encoder: the index built for it): make it with: "
            f"tessera train --dataset {SCIFACT} --model bi-encoder") in err
    assert "'tessera-cross-encoder' for flow ce, step rerank (params.model)" in err
    assert "'tessera-colbert' for flow hybrid_colbert, step rerank (params.model)" in err
    assert not indices.exists() and not out.exists()


def test_every_trained_model_a_built_in_flow_needs_is_made_by_a_recipe(home):
    """train_command gives, for each such model, a command the train parser accepts and whose
    recipe makes exactly that name."""
    import argparse

    from flows.commands.train import add_arguments
    from flows.train.recipe import load_recipe, model_name, train_command

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    needed = {need.reference for path in SPECS.glob("*.yaml") if path.stem != "ingest"
              for need in flow_needs(FlowSpec.load(str(path)))} - PACKAGED
    assert {"tessera-bi-encoder", "tessera-cross-encoder", "tessera-colbert", "tessera-long-cross-encoder"} <= needed
    for reference in needed:
        command = train_command(reference)
        assert command, reference
        last = shlex.split(command.rsplit(", then ", 1)[-1])
        assert last[:2] == ["tessera", "train"]
        args = parser.parse_args(last[2:])
        makes = load_recipe(args.spec)[1].makes
        assert model_name(args.name_prefix, args.models[0]) == reference
        assert makes.name_prefix == args.name_prefix and args.models[0] in makes.models
    assert train_command("tessera-wikipedia-cross-encoder").startswith(  # its base, trained first
        f"tessera train --dataset {SCIFACT} --model cross-encoder, then ")
    assert train_command("no-such-model") is None


def test_operators_declare_their_models_and_placed_steps_are_skipped(home, bi_encoder_index):
    spec = FlowSpec.parse({"name": "f", "steps": {
        "multi": {"op": "retrieve.multi_collection", "params": {"collections": [
            {"name": "a", "index": str(bi_encoder_index), "retriever": "dense"},
            {"name": "b", "index": str(bi_encoder_index)}]}},
        "mood": {"op": "analyze.sentiment", "params": {"method": "lexicon"}},
        "ce": {"op": "rerank.cross_encoder", "placement": {"deployment": "tessera-cross-encoder"}},
        "emb": {"op": "rerank.embedding", "params": {"model": "my-encoder"}}}})
    assert [(n.reference, n.step, n.where) for n in flow_needs(spec)] == [
        ("tessera-bi-encoder", "multi", "params.collections.0.params.index (its encoder)"),
        ("my-encoder", "emb", "params.model")]
    with pytest.raises(MissingModelsError, match="nothing is downloaded"):  # no how_to_make: the resolver's reason
        check_models([spec])
    check_models([FlowSpec.load("hybrid").with_index(str(bi_encoder_index.parent / "none"))])  # opens no index


def test_a_bm25_multi_hop_flow_needs_no_encoder_and_a_hybrid_one_does():
    """What a multi-hop step needs of its index follows its retriever (its index is built without vectors)."""
    assert [n.reference for n in flow_needs(FlowSpec.load("bm25_multihop"))] == []
    assert {n.step for n in flow_needs(FlowSpec.load("hybrid_multihop"))} == {"hops"}


def test_a_step_that_searches_by_what_its_index_lacks_is_refused_before_any_step_runs(tmp_path):
    """The dense retriever's own check came when its step ran, after the steps before it (`rag`'s LLM rewrite and
    BM25 over every query): now `check_models` names it first, in the words of `tessera ingest`'s option."""
    import pyarrow as pa

    from operators.errors import SpecError

    words = pa.table({"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                      "text": ["honey bees make honey from nectar", "ants farm aphids for honeydew"]})
    Index.create(tmp_path / "words", IndexSettings(dense=False)).add(words)
    for flow, step in [("hybrid", "dense"), ("rag", "dense"), ("hybrid_multihop", "hops")]:
        with pytest.raises(SpecError, match=r"built without vectors \(--no-dense of tessera ingest or tessera "
                           r"index add; settings={'dense': False}") as refused:
            check_models([FlowSpec.load(flow).with_index(str(tmp_path / "words"))])
        assert (refused.value.step, refused.value.field) == (step, f"steps.{step}.params.index"), flow
    # a flow made for a trained encoder whose models are not made either: the index's lack is what is said first
    # (it was told the index had the wrong encoder, and to run hybrid or dense, which need vectors too)
    with pytest.raises(SpecError, match="built without vectors"):
        check_models([FlowSpec.load("hybrid_ce").with_index(str(tmp_path / "words"))])
    for flow in ("bm25", "bm25_multihop"):  # what such an index serves passes
        check_models([FlowSpec.load(flow).with_index(str(tmp_path / "words"))])
    with pytest.raises(SpecError, match="built without vectors"):  # every flow of a list: the last alone before
        check_models([FlowSpec.load(flow).with_index(str(tmp_path / "words")) for flow in ("hybrid", "bm25")])


def test_a_bad_llm_threads_setting_is_refused_before_any_step_when_the_embedded_model_runs(monkeypatch,
                                                                                          llm_fault_server):
    """TESSERA_LLM_THREADS=many was found at the answer step, after the retrieval and the context had run."""
    from flows.model_check import check_env
    from operators.errors import SettingError

    def answering(model: str) -> FlowSpec:
        return FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "/nowhere", "k": 3}},
                                         "context": {"op": "generate.context", "inputs": ["bm25"]},
                                         "answer": {"op": "generate.answer", "inputs": ["context"],
                                                    "params": {"model": model}}}})

    monkeypatch.setenv("TESSERA_LLM_THREADS", "many")
    with pytest.raises(SettingError, match=r"TESSERA_LLM_THREADS must be a whole number, 1 or more \(got 'many'\)"):
        check_env(answering("local"))
    monkeypatch.setenv("OLLAMA_API_BASE", llm_fault_server.base)  # an Ollama server that answers
    check_env(answering("ollama_chat/gemma2"))  # a model elsewhere: the setting is not read, nothing to refuse
    check_env(FlowSpec.load("bm25"))
    monkeypatch.setenv("TESSERA_LLM_THREADS", "2")
    check_env(answering("local"))
