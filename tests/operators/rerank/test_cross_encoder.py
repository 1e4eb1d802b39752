"""rerank.cross_encoder: the operator ranks exactly as CrossEncoder.predict scores, on real sample documents."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators import create
from operators.models import load_cross_encoder
from operators.testing import OperatorContract, sample_results


@pytest.mark.integration
class TestCrossEncoderContract(OperatorContract):
    operator_name = "rerank.cross_encoder"

    @pytest.fixture(autouse=True)
    def _model(self, cross_encoder_path):
        self.model_path = str(cross_encoder_path)

    def make_operator(self, **params):
        return create(self.operator_name, {"model": self.model_path, **params})

    def make_input(self, n_queries: int = 3, per_query: int = 3) -> pa.Table:
        return sample_results(n_queries, per_query)  # three candidates a query keep the forward passes few on CPU


def direct_scores(model_path, query: str, rows: pa.Table) -> np.ndarray:
    import torch

    model = load_cross_encoder(str(model_path))
    texts = [f"{h}\n{t}" if h else t for h, t in zip(rows.column("title").to_pylist(), rows.column("text").to_pylist())]
    return model.predict([(query, t) for t in texts], activation_fn=torch.nn.Identity(), show_progress_bar=False)


@pytest.mark.integration
def test_ranking_is_the_models_ranking_and_the_tail_keeps_its_order(cross_encoder_path):
    table = sample_results(n_queries=2, per_query=10)
    out = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "n": 6}, step_id="ce")(table)
    assert out.num_rows == table.num_rows
    for qid in ("q1", "q2"):
        before = table.filter(pc.equal(table["qid"], qid))
        after = out.filter(pc.equal(out["qid"], qid))
        head = before.slice(0, 6)
        direct = direct_scores(cross_encoder_path, head["query"][0].as_py(), head)
        expected = np.asarray(head["docno"].to_pylist())[np.argsort(-direct, kind="stable")]
        assert after["docno"].to_pylist()[:6] == list(expected)
        assert after["docno"].to_pylist()[6:] == before["docno"].to_pylist()[6:], "rows below n keep their order"
        assert after["rank"].to_pylist() == list(range(1, 11))
        assert after["rank_ce"].to_pylist() == list(range(1, 11))
        scores = after["score"].to_numpy()
        assert np.all(np.diff(scores) < 0), "score must fall as rank rises, the tail included"
        own = after["score_ce"].to_pylist()
        assert all(s is not None for s in own[:6]) and all(s is None for s in own[6:])
        np.testing.assert_allclose(sorted(own[:6], reverse=True), np.sort(direct)[::-1], rtol=1e-5)


@pytest.mark.integration
def test_query_parameter_overrides_the_flow_query(cross_encoder_path):
    table = sample_results(n_queries=1, per_query=8)
    other = "volcanic eruptions and lava"
    out = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "query": other})(table)
    expected = np.asarray(table["docno"].to_pylist())[np.argsort(-direct_scores(cross_encoder_path, other, table),
                                                                 kind="stable")]
    assert out["docno"].to_pylist() == list(expected)
    assert out["query"].to_pylist() == table["query"].to_pylist(), "the flow's query column is left as it was"


@pytest.mark.integration
@pytest.mark.parametrize("long_texts", ["truncate", "max_window"])
def test_overlong_candidates_are_truncated_not_fatal(cross_encoder_path, long_texts):
    table = sample_results(n_queries=1, per_query=3)
    long_text = pa.array([" ".join(["pollination"] * 2_000)] * 3)  # 2,000 tokens against a window of 128
    table = table.set_column(table.column_names.index("text"), "text", long_text)
    long_query = " ".join(["why do flowers need bees"] * 40)  # longer than max_length by itself
    for query in (None, long_query):
        params = {"model": str(cross_encoder_path), "max_length": 128, "long_texts": long_texts, "max_windows": 4,
                  "query": query, "on_error": "error"}
        out = create("rerank.cross_encoder", params)(table)
        assert out.num_rows == 3 and out["score"].null_count == 0


def test_max_windows_bounds_the_pairs_of_a_huge_candidate():
    from operators.rerank._windows import windowed_pairs

    pairs, owners = windowed_pairs(_tokenizer(), "bees", [" ".join(["pollination"] * 2_000), "short"], 128, 0.5, 4)
    assert owners.tolist() == [0, 0, 0, 0, 1]
    assert pairs[0][1].startswith("pollination") and pairs[-1] == ("bees", "short")


def test_missing_checkpoint_fails_at_setup_naming_the_fix(tmp_path):
    from operators.errors import OperatorError
    from operators.models import ModelNotFoundError

    op = create("rerank.cross_encoder", {"model": "no-such-reranker"})
    with pytest.raises((ModelNotFoundError, OperatorError), match="tessera train"):
        op(sample_results(1, 2))


@pytest.mark.integration  # loads and saves a cross-encoder with torch
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


# -- long_texts: max_window ------------------------------------------------------------


def _tokenizer():
    from transformers import AutoTokenizer

    from operators.models import resolve_model_path

    return AutoTokenizer.from_pretrained(str(resolve_model_path("minilm")), local_files_only=True)


def _long_sample_document() -> tuple[str, str]:
    """A real sample article's title over the texts of four sample articles (~1,000 tokens, no repeats)."""
    docs = sample_results(2, 2).to_pylist()
    return docs[0]["title"], " ".join(doc["text"] for doc in docs)


@pytest.mark.parametrize("stride", [0.5, 1.0])
def test_windows_fit_beside_the_query_keep_the_title_and_cover_the_whole_text(stride):
    from operators.rerank.base import TitledTexts
    from operators.rerank._windows import windowed_pairs

    tokenizer = _tokenizer()
    title, body = _long_sample_document()
    query = "how did musical style change in the twentieth century?"
    short = "A short candidate."
    pairs, owners = windowed_pairs(tokenizer, query, TitledTexts([title, None], [body, short]), 128, stride)
    assert owners.tolist() == [0] * (len(pairs) - 1) + [1]
    assert pairs[-1] == (query, short), "a text that fits is one window, as without windows"
    pieces = []
    for pair_query, window in pairs[:-1]:
        assert pair_query == query and window.startswith(f"{title}\n")
        assert len(tokenizer(pair_query, window)["input_ids"]) <= 128, "a window must fit without truncation"
        piece = window[len(title) + 1:]
        pieces.append((body.index(piece), body.index(piece) + len(piece)))
    count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    room = 128 - 3 - count(query) - count(title)  # [CLS] query [SEP] title text [SEP]
    step = int(room * stride)
    assert len(pieces) == 1 + math.ceil((count(body) - room) / step) > 2
    assert pieces[0][0] == 0 and pieces[-1][1] == len(body), "the windows reach both ends of the text"
    for (start, end), (next_start, _) in zip(pieces, pieces[1:]):
        assert start < next_start <= end + 1, "each window starts inside or right after the one before"
        if stride == 0.5:
            assert next_start < end, "half-stride windows overlap"


def test_plain_strings_are_windowed_whole():
    from operators.rerank._windows import windowed_pairs

    title, body = _long_sample_document()
    pairs, owners = windowed_pairs(_tokenizer(), "music", [body], 96, 0.5)
    assert set(owners.tolist()) == {0} and len(pairs) > 1
    assert pairs[0][1] == body[:len(pairs[0][1])], "without a title the first window is the text's beginning"


@pytest.mark.integration
def test_max_window_scores_a_long_candidate_by_its_best_window_and_leaves_short_ones_alone(cross_encoder_path):
    import torch

    from operators.rerank.base import TitledTexts
    from operators.rerank._windows import windowed_pairs

    table = sample_results(n_queries=1, per_query=4)
    title, body = _long_sample_document()
    texts = table["text"].to_pylist()
    texts[1] = body
    table = table.set_column(table.column_names.index("text"), "text", pa.array(texts))
    table = table.set_column(table.column_names.index("title"), "title",
                             pa.array([t if i != 1 else title for i, t in enumerate(table["title"].to_pylist())]))
    params = {"model": str(cross_encoder_path), "max_length": 128, "n": None}
    truncated = create("rerank.cross_encoder", params, step_id="ce")(table)
    windowed = create("rerank.cross_encoder", {**params, "long_texts": "max_window"}, step_id="ce")(table)
    by_doc = lambda out: dict(zip(out["docno"].to_pylist(), out["score_ce"].to_pylist()))  # noqa: E731
    before, after = by_doc(truncated), by_doc(windowed)
    long_docno, query, tokenizer = table["docno"][1].as_py(), table["query"][0].as_py(), _tokenizer()
    short_docnos = [docno for docno, title_i, text in zip(table["docno"].to_pylist(), table["title"].to_pylist(), texts)
                    if len(tokenizer(query, f"{title_i}\n{text}")["input_ids"]) <= 128]
    assert short_docnos, "the sample needs a candidate that fits in 128 tokens"
    for docno in short_docnos:
        assert after[docno] == pytest.approx(before[docno], abs=1e-5), "a candidate that fits scores as before"
    model = load_cross_encoder(str(cross_encoder_path), max_length=128)
    pairs, _ = windowed_pairs(model.tokenizer, query, TitledTexts([title], [body]), 128, 0.5)
    window_scores = model.predict(pairs, activation_fn=torch.nn.Identity(), show_progress_bar=False)
    assert len(pairs) > 1 and after[long_docno] == pytest.approx(float(np.max(window_scores)), abs=1e-5)
    assert after[long_docno] >= window_scores[0] - 1e-6


def test_titled_texts_survive_the_pickling_that_carries_them_to_a_deployment():
    import pickle

    import cloudpickle

    from operators.rerank.base import TitledTexts

    texts = TitledTexts(["Pollination", None], ["Bees carry pollen.", "Untitled text."])
    assert list(texts) == ["Pollination\nBees carry pollen.", "Untitled text."]
    for dumps in (pickle.dumps, cloudpickle.dumps):
        back = pickle.loads(dumps(texts))
        assert type(back) is TitledTexts and list(back) == list(texts)
        assert back.titles == ["Pollination", ""] and back.bodies == texts.bodies


@pytest.mark.integration
def test_half_precision_scores_are_the_full_precision_ones_within_rounding(cross_encoder_path):
    import torch

    table = sample_results(n_queries=1, per_query=10)  # ten real pairs: enough to see bf16's rounding
    full = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "n": 10}, step_id="ce")(table)
    op = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "n": 10, "dtype": "bfloat16"},
                step_id="ce")
    half = op(table)
    assert next(op.model.parameters()).dtype == torch.bfloat16
    np.testing.assert_allclose(half["score_ce"].to_numpy(), full["score_ce"].to_numpy(), atol=0.02)
    assert not np.array_equal(half["score_ce"].to_numpy(), full["score_ce"].to_numpy())


@pytest.mark.integration
@pytest.mark.parametrize("long_texts", ["truncate", "max_window"])
def test_the_queries_of_a_batch_share_one_predict_and_score_as_each_alone(cross_encoder_path, long_texts):
    """One predict over every query's pairs (a GPU left half idle by 100-pair calls: benchmarks/gpu/RESULTS.md),
    with the scores each query gets alone, windows included."""
    op = create("rerank.cross_encoder", {"model": str(cross_encoder_path), "max_length": 64,
                                         "long_texts": long_texts}, step_id="ce")
    op.ensure_setup()
    queries, texts = ["vitamin d and bone density", "gene expression in tumours"], [
        ["short text", "a much longer candidate " * 30, ""], ["another candidate about cells", "cells " * 80]]
    alone = [op.score_texts(q, t) for q, t in zip(queries, texts)]
    calls = []
    predict = op._predict  # the operator's one call of its model, whichever tokenizing it takes
    op._predict = lambda pairs: calls.append(len(pairs)) or predict(pairs)
    together = op.score_queries(queries, texts)
    assert len(calls) == 1 and calls[0] >= 5, calls
    for mine, theirs in zip(together, alone):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.integration
def test_a_failing_batch_is_scored_query_by_query_so_the_failure_stays_with_its_query(cross_encoder_path):
    op = create("rerank.cross_encoder", {"model": str(cross_encoder_path)}, step_id="ce")
    op.ensure_setup()
    predict = op._predict

    def fails_on_poison(pairs):
        if any(text == "poison" for _, text in pairs):
            raise ValueError("the model cannot read this pair")
        return predict(pairs)

    op._predict = fails_on_poison
    bad, good = op.score_queries(["first query", "second query"], [["poison", "fine"], ["a good candidate"]])
    assert isinstance(bad, ValueError)
    np.testing.assert_allclose(good, op.score_texts("second query", ["a good candidate"]), rtol=1e-5)
