"""A model a step loads as a cross-encoder is checked to be one before any work, from its config.json alone.

The packaged MiniLM is a real bi-encoder folder (``BertModel``, no sequence-classification head). Placed where a
cross-encoder belongs (``tessera-cross-encoder`` in ``$TESSERA_HOME/models``, or ``rerank.cross_encoder``'s
``model``), it used to pass the pre-run check and fail only when the step loaded it: for a Serve deployment with
``missing_models: skip``, at the replica's start.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flows.model_check import MissingModelsError, check_models, operator_problem
from flows.spec import FlowSpec
from operators.store import Index, IndexSettings


@pytest.fixture
def bi_encoder_named_cross_encoder(tmp_path, monkeypatch) -> Path:
    """``tessera-cross-encoder`` in a fresh ``$TESSERA_HOME``'s model repository: a copy of the packaged MiniLM
    bi-encoder (nothing else is there)."""
    from operators.models import resolve_model_path

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    folder = tmp_path / "home" / "models" / "tessera-cross-encoder"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), folder)
    return folder


def _flow(model: str, *, embed: bool = True) -> FlowSpec:
    """BM25, then ``model`` as the reranker and (``embed``) as the embedding step's model too."""
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"index": "unused"}},
             "embed": {"op": "embed.sentence_transformer", "params": {"model": model}},
             "rerank": {"op": "rerank.cross_encoder", "params": {"model": model}}}
    if not embed:
        del steps["embed"]
    return FlowSpec.parse({"name": "ce", "steps": steps})


def test_a_bi_encoder_where_a_cross_encoder_belongs_is_refused_by_the_pre_run_check(tmp_path, capsys, monkeypatch,
                                                                                    bi_encoder_named_cross_encoder):
    from flows.commands import main
    from flows.executors.local import LocalExecutor

    with pytest.raises(MissingModelsError) as raised:
        check_models([_flow("all-MiniLM-L6-v2")])
    # only the rerank step: the same folder is a fine model for the embedding step
    assert {ref: [(n.step, n.kind) for n in needs] for ref, needs in raised.value.missing.items()} == {
        "all-MiniLM-L6-v2": [("rerank", "cross-encoder")]}
    assert "not a cross-encoder" in str(raised.value) and "architectures are BertModel" in str(raised.value)
    assert str(raised.value).startswith("1 model(s) needed are here but not of the kind their step needs, so nothing")

    def refuse(*args, **kwargs):
        raise AssertionError("a step ran before the models were checked")

    monkeypatch.setattr(LocalExecutor, "run", refuse)
    index = Index.create(tmp_path / "index", IndexSettings(encoder="tessera-bi-encoder", dense=True)).path
    assert main(["run", "hybrid_ce", "--index", str(index), "--queries", "honey bees", "--no-cache"]) == 2
    err = capsys.readouterr().err
    # the name resolves to a folder, but of the wrong kind: the reason, not the command that makes the name
    assert "'tessera-cross-encoder' for flow hybrid_ce, step rerank (params.model): not a cross-encoder: " in err
    scifact = "../shared/data/scifact" if Path("../shared/data/scifact").is_dir() else "<path-to-scifact>"
    make = f"make it with: tessera train --dataset {scifact} --model"
    assert str(bi_encoder_named_cross_encoder) in err and f"{make} bi-encoder" in err  # the absent one: its command
    assert f"{make} cross-encoder" not in err
    assert ("1 model(s) needed are not on this machine and 1 model(s) needed are here but not of the kind their "
            "step needs, so nothing was run") in err


def test_operator_problem_is_what_a_serve_deployment_checks_before_a_replica_starts(untrained_ce,
                                                                                    bi_encoder_named_cross_encoder):
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.rerank.cross_encoder import CrossEncoderReranker

    problem = operator_problem(CrossEncoderReranker({"model": "tessera-cross-encoder"}, step_id="ce"))
    assert problem.startswith(f"not a cross-encoder: {bi_encoder_named_cross_encoder} has no sequence-classification")
    assert operator_problem(CrossEncoderReranker({"model": str(untrained_ce)}, step_id="ce")) is None
    assert operator_problem(SentenceTransformerEmbedder({"model": "all-MiniLM-L6-v2"}, step_id="embed")) is None
    missing = operator_problem(CrossEncoderReranker({"model": "no-such-reranker"}, step_id="ce"))
    assert "no-such-reranker" in missing and "not a cross-encoder" not in missing
    check_models([_flow(str(untrained_ce), embed=False)])  # a real cross-encoder passes: no weights are read
    with pytest.raises(MissingModelsError, match="is here but is a cross-encoder"):  # but embeds nothing
        check_models([_flow(str(untrained_ce))])
