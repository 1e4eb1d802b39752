"""rerank.colbert, the ColBERT model and its training: contract, MaxSim, precomputed tokens, checkpoint layouts.

The behaviour tests train a real ColBERT model for a few steps on SciFact train triples
(positive: a train qrel; negatives: random other documents) and rerank real SciFact
candidates with it; they are marked ``data`` and skip when ../shared/data is absent.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import string

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.rerank.colbert import ColbertReranker
from operators.testing import OperatorContract

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DOC_MAXLEN = 64  # short documents keep the tiny training run and the reranking fast


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def untrained_colbert(tmp_path_factory):
    """MiniLM + a seeded, untrained projection, saved in Tessera's layout (needs no evaluation data)."""
    from operators.models.colbert import new_colbert

    model = new_colbert("minilm", dim=64, seed=1, device="cpu", doc_maxlen=32)
    return model.save(tmp_path_factory.mktemp("colbert") / "untrained")


@pytest.fixture(scope="session")
def scifact(shared_data):
    root = shared_data / "scifact"
    if not (root / "qrels" / "train.tsv").is_file():
        pytest.skip(f"SciFact train qrels not present under {root}")
    corpus = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            corpus[doc["_id"]] = doc
    with open(root / "queries.jsonl", encoding="utf-8") as f:
        queries = {q["_id"]: q["text"] for q in map(json.loads, f)}
    with open(root / "qrels" / "train.tsv", encoding="utf-8") as f:
        qrels = [(q, d) for q, d, _ in list(csv.reader(f, delimiter="\t"))[1:] if d in corpus]
    return corpus, queries, qrels


def _text(doc: dict) -> str:
    return f"{doc['title']}\n{doc['text']}" if doc["title"] else doc["text"]


def _triples(scifact, start: int, n: int, negatives: int, seed: int) -> list[dict]:
    corpus, queries, qrels = scifact
    rng = random.Random(seed)
    ids = sorted(corpus)
    out = []
    for qid, docno in qrels[start:start + n]:
        others = [d for d in rng.sample(ids, negatives + 1) if d != docno][:negatives]
        out.append({"qid": qid, "docno": docno, "query": queries[qid], "positive": _text(corpus[docno]),
                    "negatives": [_text(corpus[d]) for d in others], "negative_docnos": others})
    return out


@pytest.fixture(scope="session")
def train_triples(scifact):
    return _triples(scifact, 0, 32, negatives=1, seed=0)


@pytest.fixture(scope="session")
def trained_colbert(tmp_path_factory, train_triples):
    """A ColBERT model trained for 4 steps on 32 SciFact train triples (Tessera's layout)."""

    from flows.train.colbert import train_colbert

    return train_colbert(train_triples, output_dir=tmp_path_factory.mktemp("colbert") / "trained", max_steps=4,
                         batch_size=8, lr=1e-4, seed=0, progress=False, doc_maxlen=DOC_MAXLEN)


def _results(scifact, triples) -> pa.Table:
    """Candidates per query: the negatives first, the positive last (the reranker must lift it)."""
    corpus, _, _ = scifact
    rows = []
    for t in triples:
        docnos = [*t["negative_docnos"], t["docno"]]
        for r, docno in enumerate(docnos):
            doc = corpus[docno]
            rows.append({"qid": t["qid"], "query": t["query"], "docno": docno, "title": doc["title"],
                         "text": doc["text"], "score": float(len(docnos) - r), "rank": r + 1})
    table = pa.Table.from_pylist(rows)
    return table.set_column(table.column_names.index("rank"), "rank", table.column("rank").cast(pa.int32()))


# -- the contract ------------------------------------------------------------------------------


@pytest.mark.integration
class TestColbertRerankContract(OperatorContract):
    operator_name = "rerank.colbert"

    @pytest.fixture(autouse=True)
    def _model(self, untrained_colbert):
        self.model_path = str(untrained_colbert)

    def make_operator(self, **params):
        return ColbertReranker({"model": self.model_path, "device": "cpu", **params})


def test_bad_params_name_the_field():
    from operators.errors import ParamsError

    with pytest.raises(ParamsError) as err:
        ColbertReranker({"aggregation": "max"})
    assert err.value.field == "params.aggregation"


@pytest.mark.integration  # loads MiniLM with torch
def test_a_plain_encoder_is_refused_with_the_reason():
    from operators.errors import OperatorError

    op = ColbertReranker({"model": "minilm", "device": "cpu", "on_error": "error"})
    with pytest.raises(OperatorError) as err:
        op(_tiny_table())
    assert "no ColBERT projection" in str(err.value)


@pytest.mark.integration  # builds a ColBERT checkpoint with torch
def test_a_checkpoint_of_a_later_format_is_refused_naming_it(tmp_path, untrained_colbert):
    """Read as this release's, a later Tessera's checkpoint would score with the wrong settings without a word."""
    from operators.errors import OperatorError
    from operators.models.colbert import CONFIG_FILE, FORMAT

    later = shutil.copytree(untrained_colbert, tmp_path / "later")
    config = json.loads((later / CONFIG_FILE).read_text())
    assert config["format"] == FORMAT == "tessera-colbert/1"
    (later / CONFIG_FILE).write_text(json.dumps({**config, "format": "tessera-colbert/2"}))
    before = {p.name: p.read_bytes() for p in later.iterdir() if p.is_file()}
    op = ColbertReranker({"model": str(later), "device": "cpu", "on_error": "error"})
    with pytest.raises(OperatorError, match=r"has format 'tessera-colbert/2', which a later Tessera saved \(this one "
                                            r"reads 'tessera-colbert/1'\)"):
        op(_tiny_table())
    assert {p.name: p.read_bytes() for p in later.iterdir() if p.is_file()} == before


def _tiny_table(query: str = "honey bees", texts: tuple[str, ...] = ("Bees make honey.", "Opera in Vienna.")):
    n = len(texts)
    return pa.table({"qid": ["q"] * n, "query": [query] * n, "docno": [f"d{i}" for i in range(n)],
                     "text": list(texts), "score": [float(n - i) for i in range(n)],
                     "rank": pa.array(range(1, n + 1), pa.int32())})


# -- training and reranking --------------------------------------------------------------------


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_training_lowers_the_loss_and_saves_a_loadable_checkpoint(trained_colbert, train_triples):
    import torch

    from flows.train.colbert import colbert_loss
    from operators.models.colbert import load_colbert, new_colbert

    info = json.loads((trained_colbert / "training.json").read_text())
    assert info["steps"] == 4 and len(info["losses"]) == 4
    assert not list(trained_colbert.parent.glob(".trained.tmp-*")), "a temporary folder was left behind"
    before = new_colbert("minilm", seed=0, device="cpu", doc_maxlen=DOC_MAXLEN)
    after = load_colbert(str(trained_colbert), device="cpu")
    assert after.config.doc_maxlen == DOC_MAXLEN and after.dim == 128
    with torch.no_grad():
        loss_before = float(colbert_loss(before.eval(), train_triples[:16]))
        loss_after = float(colbert_loss(after.eval(), train_triples[:16]))
    assert loss_after < loss_before, (loss_before, loss_after)


@pytest.mark.data
def test_training_is_deterministic_and_checks_its_examples(tmp_path, train_triples):
    from flows.train.colbert import TrainingDataError, train_colbert
    from safetensors.torch import load_file

    small = [{**t, "negatives": t["negatives"][:1]} for t in train_triples[:4]]
    runs = [train_colbert(small, output_dir=tmp_path / f"run{i}", max_steps=2, batch_size=2, seed=7,
                          progress=False, doc_maxlen=24, query_maxlen=8) for i in range(2)]
    first, second = (load_file(str(p / "colbert_linear.safetensors"))["weight"] for p in runs)
    assert (first == second).all()
    losses = [json.loads((p / "training.json").read_text())["losses"] for p in runs]
    assert losses[0] == losses[1]
    with pytest.raises(TrainingDataError) as err:
        train_colbert([{"query": "q", "positive": "", "negatives": []}], output_dir=tmp_path / "bad")
    assert err.value.field == "examples[0].positive"
    with pytest.raises(TrainingDataError) as err:
        train_colbert([{"query": "q", "positive": "p", "negatives": "not a list"}], output_dir=tmp_path / "bad")
    assert err.value.field == "examples[0].negatives"


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_the_trained_model_lifts_the_relevant_document(scifact, trained_colbert):
    held_out = _triples(scifact, 100, 8, negatives=5, seed=3)  # queries the training never saw
    out = ColbertReranker({"model": str(trained_colbert), "device": "cpu", "token_store": None})(
        _results(scifact, held_out))
    reciprocal = []
    for t in held_out:
        rows = out.filter(pc.equal(out.column("qid"), t["qid"]))
        rank = rows.column("rank").to_pylist()[rows.column("docno").to_pylist().index(t["docno"])]
        reciprocal.append(1.0 / rank)
    # The positive came in last of 6 (reciprocal rank 0.17); chance after reranking is about 0.41.
    assert np.mean(reciprocal) > 0.6, reciprocal


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_sum_and_mean_equal_an_independent_numpy_maxsim(scifact, trained_colbert):
    from operators.models.colbert import load_colbert

    triple = _triples(scifact, 40, 1, negatives=5, seed=5)
    table = _results(scifact, triple)
    summed = ColbertReranker({"model": str(trained_colbert), "device": "cpu"}, step_id="cb")(table)
    meaned = ColbertReranker({"model": str(trained_colbert), "device": "cpu", "aggregation": "mean"},
                             step_id="cb")(table)
    model = load_colbert(str(trained_colbert), device="cpu")
    query = model.encode_queries([triple[0]["query"]])[0]
    docnos = table.column("docno").to_pylist()
    documents = model.encode_documents([f"{t}\n{x}" if t else x for t, x in
                                        zip(table.column("title").to_pylist(), table.column("text").to_pylist())])
    expected = {d: float(sum(max(float(np.dot(q, t)) for t in doc) for q in query))
                for d, doc in zip(docnos, documents)}
    got_sum = dict(zip(summed.column("docno").to_pylist(), summed.column("score_cb").to_pylist()))
    got_mean = dict(zip(meaned.column("docno").to_pylist(), meaned.column("score_cb").to_pylist()))
    assert query.shape == (32, 128)
    for docno in docnos:
        assert got_sum[docno] == pytest.approx(expected[docno], rel=1e-4, abs=1e-4)
        assert got_mean[docno] == pytest.approx(expected[docno] / len(query), rel=1e-4, abs=1e-5)
    assert summed.column("docno").to_pylist() == meaned.column("docno").to_pylist()
    assert summed.column("docno").to_pylist()[0] == max(expected, key=expected.get)


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_precomputed_tokens_rank_like_on_the_fly(tmp_path, scifact, trained_colbert):
    from operators.store import Index
    from operators.store.token_store import build_token_store

    corpus, _, _ = scifact
    triples = _triples(scifact, 60, 3, negatives=7, seed=9)
    table = _results(scifact, triples)
    docnos = sorted(set(table.column("docno").to_pylist()))
    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(pa.table({"docno": docnos, "doc_id": docnos, "title": [corpus[d]["title"] for d in docnos],
                        "text": [corpus[d]["text"] for d in docnos]}))
    store = build_token_store(index, str(trained_colbert))
    assert len(store) == len(docnos) and store.dim == 128
    precomputed = ColbertReranker({"model": str(trained_colbert), "device": "cpu", "index": str(index.path)},
                                  step_id="cb")
    on_the_fly = ColbertReranker({"model": str(trained_colbert), "device": "cpu", "token_store": None}, step_id="cb")
    a, b = precomputed(table), on_the_fly(table)
    assert precomputed.counts == {"stored": table.num_rows, "encoded": 0}
    assert on_the_fly.counts == {"stored": 0, "encoded": table.num_rows}
    for t in triples:
        fast = a.filter(pc.equal(a.column("qid"), t["qid"]))
        slow = b.filter(pc.equal(b.column("qid"), t["qid"]))
        fast_scores = dict(zip(fast.column("docno").to_pylist(), fast.column("score_cb").to_pylist()))
        slow_scores = dict(zip(slow.column("docno").to_pylist(), slow.column("score_cb").to_pylist()))
        tolerance = 5e-3 * len(fast_scores)  # float16 rounding of each stored vector
        for docno, score in slow_scores.items():
            assert fast_scores[docno] == pytest.approx(score, abs=5e-3)
        order = slow.column("docno").to_pylist()
        fast_rank = {d: i for i, d in enumerate(fast.column("docno").to_pylist())}
        for i, above in enumerate(order):  # same ranking, except between scores closer than the tolerance
            for below in order[i + 1:]:
                if slow_scores[above] - slow_scores[below] > tolerance:
                    assert fast_rank[above] < fast_rank[below], (above, below)


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_an_explicit_token_store_for_another_model_is_refused(tmp_path, untrained_colbert, trained_colbert,
                                                              scifact):
    from operators.errors import OperatorError
    from operators.store import Index
    from operators.store.token_store import build_token_store

    corpus, _, _ = scifact
    docnos = sorted(corpus)[:3]
    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(pa.table({"docno": docnos, "doc_id": docnos, "text": [corpus[d]["text"] for d in docnos]}))
    store = build_token_store(index, str(untrained_colbert))
    op = ColbertReranker({"model": str(trained_colbert), "device": "cpu", "token_store": str(store.folder)})
    with pytest.raises(OperatorError) as err:
        op.setup()
    assert err.value.field == "params.token_store" and "another model" in err.value.message
    with pytest.raises(OperatorError) as err:  # an index without a store for this model
        ColbertReranker({"model": str(trained_colbert), "device": "cpu", "token_store": str(index.path)}).setup()
    assert "no ColBERT token store" in err.value.message


# -- checkpoint layouts ------------------------------------------------------------------------


def _copy_transformer(source, target, *, prefix: str = "", extra: dict | None = None):
    """The HF model files of ``source`` into ``target``, weights renamed with ``prefix`` (+ ``extra`` tensors)."""
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (source / name).is_file():
            shutil.copy(source / name, target / name)
    weights = {f"{prefix}{k}": v for k, v in load_file(str(source / "model.safetensors")).items()}
    save_file({**weights, **(extra or {})}, str(target / "model.safetensors"))


def _same_encodings(a, b, texts):
    for x, y in zip(a.encode_queries(texts), b.encode_queries(texts)):
        np.testing.assert_allclose(x, y, atol=2e-5)
    for x, y in zip(a.encode_documents(texts), b.encode_documents(texts)):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, atol=2e-5)


TEXTS = ["What protects cells from DNA damage?", "p53 (a tumour suppressor) halts the cell cycle, then repairs DNA."]


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_loads_a_pylate_checkpoint(tmp_path, trained_colbert):
    import torch
    from safetensors.torch import load_file, save_file

    from operators.models.colbert import load_colbert

    ours = load_colbert(str(trained_colbert), device="cpu")
    weight = load_file(str(trained_colbert / "colbert_linear.safetensors"))["weight"]
    folder = tmp_path / "pylate"
    _copy_transformer(trained_colbert, folder)
    # Two stacked Dense modules (a rotation, then the projection undoing it) fold back into one matrix.
    rotation = torch.linalg.qr(torch.randn(384, 384, generator=torch.Generator().manual_seed(0)))[0]
    for name, matrix in (("1_Dense", rotation), ("2_Dense", weight @ rotation.T)):
        (folder / name).mkdir()
        (folder / name / "config.json").write_text(json.dumps({
            "in_features": matrix.shape[1], "out_features": matrix.shape[0], "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity", "use_residual": False}))
        save_file({"linear.weight": matrix.contiguous()}, str(folder / name / "model.safetensors"))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "pylate.models.Dense.Dense"}]))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": DOC_MAXLEN - 1,
                                                                  "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({
        "model_type": "ColBERT", "similarity_fn_name": "MaxSim", "query_prefix": "[unused0]",
        "document_prefix": "[unused1]", "query_length": 32, "document_length": DOC_MAXLEN,
        "attend_to_expansion_tokens": False, "do_query_expansion": True,
        "skiplist_words": list(string.punctuation)}))
    theirs = load_colbert(str(folder), device="cpu")
    assert theirs.config.layout == "pylate" and theirs.config.doc_maxlen == DOC_MAXLEN
    _same_encodings(ours, theirs, TEXTS)
    table = _tiny_table(TEXTS[0], (TEXTS[1], "Opera houses of Vienna."))
    a = ColbertReranker({"model": str(trained_colbert), "device": "cpu"}, step_id="cb")(table)
    b = ColbertReranker({"model": str(folder), "device": "cpu"}, step_id="cb")(table)
    np.testing.assert_allclose(a.column("score_cb").to_numpy(), b.column("score_cb").to_numpy(), atol=1e-4)


@pytest.mark.data
@pytest.mark.integration  # trained_colbert: a 4-step training run
def test_loads_a_stanford_checkpoint(tmp_path, trained_colbert):
    from safetensors.torch import load_file

    from operators.models.colbert import load_colbert

    ours = load_colbert(str(trained_colbert), device="cpu")
    weight = load_file(str(trained_colbert / "colbert_linear.safetensors"))["weight"]
    folder = tmp_path / "stanford"
    _copy_transformer(trained_colbert, folder, prefix="bert.", extra={"linear.weight": weight})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["HF_ColBERT"]}))
    (folder / "artifact.metadata").write_text(json.dumps({
        "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
        "query_maxlen": 32, "doc_maxlen": DOC_MAXLEN, "dim": 128, "similarity": "cosine",
        "mask_punctuation": True, "attend_to_mask_tokens": False}))
    theirs = load_colbert(str(folder), device="cpu")
    assert theirs.config.layout == "stanford"
    _same_encodings(ours, theirs, TEXTS)


# -- long input --------------------------------------------------------------------------------


@pytest.mark.integration
def test_overlong_query_and_documents_are_truncated(untrained_colbert):
    from operators.models.colbert import load_colbert

    long_query = " ".join(["honey bee colony"] * 700)
    long_text = " ".join(["The honey bee is a social insect."] * 4000)
    table = _tiny_table(long_query, (long_text, "Bees make honey.", ""))
    op = ColbertReranker({"model": str(untrained_colbert), "device": "cpu", "doc_maxlen": 24, "query_maxlen": 12,
                          "on_error": "error"}, step_id="cb")
    out = op(table)
    assert out.num_rows == 3 and all(np.isfinite(out.column("score_cb").to_numpy()))
    assert op.drain_metadata() == {}
    model = load_colbert(str(untrained_colbert), device="cpu")
    assert model.encode_queries([long_query], maxlen=12)[0].shape == (12, 64)
    long_doc, short_doc, empty = model.encode_documents([long_text, "Bees make honey.", ""], maxlen=24)
    assert len(long_doc) <= 24 and len(short_doc) < 24 and len(empty) >= 1
    assert model.encode_documents([long_text])[0].shape[0] <= 64  # the checkpoint's own doc_maxlen
    assert model.encode_documents([long_text], maxlen=100_000)[0].shape[0] <= 512  # never past the positions
