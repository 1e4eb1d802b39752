"""rerank.cross_encoder: the operator ranks exactly as CrossEncoder.predict scores, on real sample documents."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators import create
from operators.models import load_cross_encoder
from operators.testing import OperatorContract, sample_results


class TestCrossEncoderContract(OperatorContract):
    operator_name = "rerank.cross_encoder"

    @pytest.fixture(autouse=True)
    def _model(self, cross_encoder_path):
        self.model_path = str(cross_encoder_path)

    def make_operator(self, **params):
        return create(self.operator_name, {"model": self.model_path, **params})


def direct_scores(model_path, query: str, rows: pa.Table) -> np.ndarray:
    import torch

    model = load_cross_encoder(str(model_path))
    texts = [f"{h}\n{t}" if h else t for h, t in zip(rows.column("title").to_pylist(), rows.column("text").to_pylist())]
    return model.predict([(query, t) for t in texts], activation_fn=torch.nn.Identity(), show_progress_bar=False)


def test_ranking_is_the_models_ranking_and_the_tail_keeps_its_order(cross_encoder_path):
    table = sample_results(n_queries=2, per_query=10)
    out = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "n": 6}, step_id="ce")(table)
    assert out.num_rows == table.num_rows
    for qid in ("q1", "q2"):
        before = table.filter(pc.equal(table["qid"], qid))
        after = out.filter(pc.equal(out["qid"], qid))
        head = before.slice(0, 6)
        expected = np.asarray(head["docno"].to_pylist())[np.argsort(-direct_scores(cross_encoder_path,
                                                                                      head["query"][0].as_py(), head),
                                                                      kind="stable")]
        assert after["docno"].to_pylist()[:6] == list(expected)
        assert after["docno"].to_pylist()[6:] == before["docno"].to_pylist()[6:], "rows below n keep their order"
        assert after["rank"].to_pylist() == list(range(1, 11))
        assert after["rank_ce"].to_pylist() == list(range(1, 11))
        scores = after["score"].to_numpy()
        assert np.all(np.diff(scores) < 0), "score must fall as rank rises, the tail included"
        own = after["score_ce"].to_pylist()
        assert all(s is not None for s in own[:6]) and all(s is None for s in own[6:])
        np.testing.assert_allclose(sorted(own[:6], reverse=True),
                                   np.sort(direct_scores(cross_encoder_path, head["query"][0].as_py(), head))[::-1],
                                   rtol=1e-5)


def test_query_parameter_overrides_the_flow_query(cross_encoder_path):
    table = sample_results(n_queries=1, per_query=8)
    other = "volcanic eruptions and lava"
    out = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "query": other})(table)
    expected = np.asarray(table["docno"].to_pylist())[np.argsort(-direct_scores(cross_encoder_path, other, table),
                                                                 kind="stable")]
    assert out["docno"].to_pylist() == list(expected)
    assert out["query"].to_pylist() == table["query"].to_pylist(), "the flow's query column is left as it was"


def test_overlong_candidates_are_truncated_not_fatal(cross_encoder_path):
    table = sample_results(n_queries=1, per_query=3)
    long_text = pa.array([" ".join(["pollination"] * 20_000)] * 3)
    table = table.set_column(table.column_names.index("text"), "text", long_text)
    out = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "max_length": 128})(table)
    assert out.num_rows == 3 and out["score"].null_count == 0


def test_missing_checkpoint_fails_at_setup_naming_the_fix(tmp_path):
    from operators.errors import OperatorError
    from operators.models import ModelNotFoundError

    op = create("rerank.cross_encoder", {"model": "no-such-reranker"})
    with pytest.raises((ModelNotFoundError, OperatorError), match="tessera train"):
        op(sample_results(1, 2))


def test_a_max_length_above_the_checkpoints_own_is_used_but_logged(cross_encoder_path, tmp_path, caplog):
    from sentence_transformers import CrossEncoder

    short = tmp_path / "ce-128"
    CrossEncoder(str(cross_encoder_path), max_length=128, local_files_only=True).save(str(short))
    with caplog.at_level("WARNING", logger="operators.models.cross_encoders"):
        assert load_cross_encoder(str(short)).max_seq_length == 128
        assert load_cross_encoder(str(short), max_length=96).max_seq_length == 96
        assert not caplog.records, "at or below the checkpoint's own limit there is nothing to warn about"
        assert load_cross_encoder(str(short), max_length=256).max_seq_length == 256
    (record,) = caplog.records
    assert "max_length 256 is above the 128 tokens" in record.getMessage() and str(short) in record.getMessage()
