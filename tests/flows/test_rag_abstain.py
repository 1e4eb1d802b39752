"""The built-in rag and rag_multihop flows on the sample index answer a question the index covers and say they
cannot answer one it does not (min_relevance on the dense retriever's cosine), without asking the model; a flow
whose rows carry no dense score is refused before it runs, naming the param."""

from __future__ import annotations

import pytest
import yaml

from flows.store import builtin_path

pytestmark = pytest.mark.integration


def rag(model: str, flow: str = "rag", **answer) -> dict:
    spec = yaml.safe_load(builtin_path(flow).read_text())
    spec["steps"]["answer"]["params"].update(model=model, **answer)
    return spec


@pytest.mark.parametrize("flow", ["rag", "rag_multihop"])
def test_an_uncovered_question_is_not_answered(fault_models, sample_index, flow):
    from flows.api import Flow

    result = Flow.load(rag("fault-ok", flow), index=str(sample_index)).run(
        ["Who composed the opera Carmen?", "who won the 2018 football world cup"])
    carmen, cup = result.metadata["1"], result.metadata["2"]
    assert carmen["relevance"] >= 0.45 and "abstained" not in carmen and carmen["answer"].startswith("Honey bees")
    assert cup["relevance"] < 0.45 and cup["abstained"] is True and cup["sources"] == []
    assert cup["answer"] == "The documents found do not answer this question." and cup["references"] == []
    assert fault_models.attempts["ok"] == 1


def test_a_flow_without_dense_scores_is_refused_naming_the_param(fault_models, sample_index):
    from flows.api import Flow
    from operators.errors import TesseraError

    spec = rag("fault-ok")
    del spec["steps"]["dense"]
    spec["steps"]["fused"]["inputs"] = ["bm25"]
    with pytest.raises(TesseraError, match="score_dense") as err:
        Flow.load(spec, index=str(sample_index)).run("Who composed the opera Carmen?")
    assert "relevance_column" in str(err.value) and fault_models.attempts["ok"] == 0


def test_the_cli_says_no_model_was_asked(fault_models, sample_index, tmp_path, run_cli):
    from flows.commands._results import ABSTAINED_NOTE

    spec = tmp_path / "rag_fault.yaml"
    spec.write_text(yaml.safe_dump(rag("fault-ok"), sort_keys=False))  # the order is the flow's
    status, out = run_cli("run", str(spec), "--index", str(sample_index), "--queries",
                          "who won the 2018 football world cup", "--no-cache")
    assert status == 0 and "answer: The documents found do not answer this question." in out, out
    assert ABSTAINED_NOTE[:40] in " ".join(out.split()) and "abstained" not in out and "relevance: 0.2" in out
