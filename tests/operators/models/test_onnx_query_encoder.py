"""The torch-free query encoder: same vectors and rankings as sentence-transformers on the packaged MiniLM,
the torch fallback (which exports the model) while the export is missing, and the models it refuses."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError
from operators.models.onnx_query_encoder import ENV, FastPathUnavailable, fast_path_plan, load_onnx_query_encoder
from operators.models.references import resolve_model_path
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, SAMPLE_QUERIES, SAMPLE_SENTENCES, sample_documents

ONNX_MISSING = [m for m in ("onnx", "onnxruntime", "onnxscript", "tokenizers") if importlib.util.find_spec(m) is None]
needs_onnx = pytest.mark.skipif(bool(ONNX_MISSING), reason=f"ONNX backend not installed ({', '.join(ONNX_MISSING)} "
                                "missing): reinstall Tessera, whose base install has them")
N_DOCS = 150
MINILM = resolve_model_path("all-MiniLM-L6-v2")


def queries() -> list[str]:
    """Real queries of several lengths and languages, and the edge cases of tokenisation and batching."""
    sample = [json.loads(line)["text"] for line in SAMPLE_CORPUS.with_name("queries.jsonl").read_text().splitlines()]
    return (sample + list(SAMPLE_QUERIES.values()) + list(SAMPLE_SENTENCES.values())
            + ["", "  honey  bees  ", "Ünïcödé café 中文 🐝", " ".join(["pollination"] * 400)])


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private TESSERA_HOME without an export yet, and the query encoder left to choose (``auto``)."""
    folder = tmp_path_factory.mktemp("tessera_home")
    patch = pytest.MonkeyPatch()
    patch.setenv("TESSERA_HOME", str(folder))
    patch.delenv(ENV, raising=False)
    yield folder
    patch.undo()


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The first sample documents embedded with torch, as ingestion does, in a one-shard index: (path, chunks)."""
    from operators.store import Index, IndexSettings

    docs = sample_documents(N_DOCS)
    docs = docs.set_column(2, "text", pc.utf8_slice_codeunits(docs.column("text"), 0, 600))
    chunks = create("embed.sentence_transformer", {"title_column": "title"})(
        docs.append_column("doc_id", docs.column("docno")))
    path = tmp_path_factory.mktemp("qe") / "sample"
    store = Index.create(path, IndexSettings())  # dense + BM25, MiniLM, 384-d, flat
    store.commit([store.write_shard("a", chunks)])
    return path, chunks


def run_dense(path, texts: list[str], **params):
    """A fresh retrieve.dense (top 10) over ``texts``: (operator, its result table)."""
    op = create("retrieve.dense", {"index": str(path), "k": 10, **params}, step_id="dense")
    return op, op(pa.table({"qid": [str(i) for i in range(len(texts))], "query": texts}))


def rankings(table: pa.Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in table.select(["qid", "docno"]).to_pylist():
        out.setdefault(row["qid"], []).append(row["docno"])
    return out


class Notices(logging.Handler):
    """The messages ``onnx_query_encoder`` logs at WARNING and above (what the CLI prints on stderr) while held."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger("operators.models.onnx_query_encoder")

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "Notices":
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self)


NOTICE = "preparing the torch-free query encoder for 'all-MiniLM-L6-v2' (once, 10-20 s)"


@pytest.fixture(scope="module")
def first_run(home, index):
    """retrieve.dense before any export exists: it must embed through torch, and export the model, saying so:
    (operator, table, the notices it logged)."""
    with Notices() as notices:
        op, out = run_dense(index[0], queries())
    return op, out, notices.messages


def torch_vectors(texts: list[str], batch_size: int = 16) -> np.ndarray:
    from operators.models import load_sentence_transformer

    return load_sentence_transformer().encode(texts, batch_size=batch_size, normalize_embeddings=True)


def assert_same_vectors(fast: np.ndarray, reference: np.ndarray) -> None:
    assert fast.shape == reference.shape and fast.dtype == np.float32
    cosine = np.sum(fast * reference, axis=1) / np.linalg.norm(fast, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() >= 0.99999, f"least similar: row {int(cosine.argmin())} ({cosine.min():.7f})"
    assert np.abs(fast - reference).max() < 1e-5


@needs_onnx
@pytest.mark.slow
def test_missing_export_falls_back_to_torch_with_exact_results_and_exports(home, index, first_run):
    op, out, notices = first_run
    assert type(op._encoder).__name__ == "SentenceTransformerEmbedder"
    assert notices == [NOTICE]  # one line before the export, for the user who waits for it
    path, chunks = index
    # numpy's exact answer from sentence-transformers' query vectors
    scores = torch_vectors(queries()) @ np.stack(chunks.column("vector").to_numpy(zero_copy_only=False)).T
    docnos = chunks.column("docno").to_pylist()
    expected = {str(i): [docnos[j] for j in np.argsort(-row, kind="stable")[:10]] for i, row in enumerate(scores)}
    assert rankings(out) == expected
    exports = list(home.glob("models/*-onnx-*/model.onnx"))
    assert len(exports) == 1, "the torch fallback should leave the ONNX export for later processes"
    assert not [p for p in exports[0].parent.iterdir() if p.name.startswith(".")], "a partial export was left"
    # the export used the process's shared torch model; its vectors must not move by a bit (they did, by 3e-8,
    # when the export left the model on eager attention, and the local and Ray executors' tables differed)
    again = create("embed.sentence_transformer", {"title_column": "title"})(chunks.drop_columns(["vector"]))
    assert again.column("vector").equals(chunks.column("vector"))


@needs_onnx
@pytest.mark.slow
def test_fast_path_gives_sentence_transformers_vectors(first_run):
    texts = queries()
    encoder = load_onnx_query_encoder("all-MiniLM-L6-v2")
    assert encoder.dimension == 384
    assert_same_vectors(encoder.encode(texts), torch_vectors(texts))
    assert_same_vectors(encoder.encode(texts, batch_size=3), torch_vectors(texts, batch_size=3))
    assert encoder.encode([]).shape == (0, 384)


@needs_onnx
@pytest.mark.slow
def test_dense_rankings_are_identical_on_the_fast_path(index, first_run):
    path, _ = index
    with Notices() as notices:
        op, out = run_dense(path, queries())
    assert type(op._encoder).__name__ == "OnnxQueryEncoder" and notices.messages == []  # nothing to prepare
    assert rankings(out) == rankings(first_run[1])
    np.testing.assert_allclose(out.column("score").to_numpy(), first_run[1].column("score").to_numpy(), atol=1e-5)
    # a query prompt and a small batch reach the fast path as they reach torch
    params = {"query_prompt": "query: ", "encode_batch_size": 2}
    fast_op, fast = run_dense(path, queries()[:7], **params)
    patch = pytest.MonkeyPatch()
    patch.setenv(ENV, "torch")
    try:
        torch_op, slow = run_dense(path, queries()[:7], **params)
    finally:
        patch.undo()
    assert type(torch_op._encoder).__name__ == "SentenceTransformerEmbedder"
    assert type(fast_op._encoder).__name__ == "OnnxQueryEncoder"
    assert rankings(fast) == rankings(slow)
    np.testing.assert_allclose(fast.column("score").to_numpy(), slow.column("score").to_numpy(), atol=1e-5)
    unprompted = first_run[1].slice(0, 10).column("score").to_numpy()
    assert np.abs(fast.slice(0, 10).column("score").to_numpy() - unprompted).max() > 1e-3  # the prompt was applied


@needs_onnx
@pytest.mark.slow
@pytest.mark.data
def test_scifact_queries_match_on_the_fast_path(shared_data, index, first_run):
    lines = (shared_data / "scifact" / "queries.jsonl").read_text().splitlines()[:48]
    texts = [json.loads(line)["text"] for line in lines]
    assert_same_vectors(load_onnx_query_encoder("all-MiniLM-L6-v2").encode(texts), torch_vectors(texts))
    patch = pytest.MonkeyPatch()
    patch.setenv(ENV, "torch")
    try:
        _, slow = run_dense(index[0], texts)
    finally:
        patch.undo()
    op, fast = run_dense(index[0], texts)
    assert type(op._encoder).__name__ == "OnnxQueryEncoder"
    assert rankings(fast) == rankings(slow)


def dense_in_a_fresh_process(index_path, home, timeout: int) -> tuple[dict, str]:
    """retrieve.dense's first query in a new Python process with ``home`` as $TESSERA_HOME: (its docnos, the heavy
    modules it imported and its encoder's class, as a dict; its stderr)."""
    script = (
        "import json, sys, pyarrow as pa\n"
        "from operators.registry import create\n"
        f"op = create('retrieve.dense', {{'index': {str(index_path)!r}, 'k': 10}})\n"
        "out = op(pa.table({'qid': ['0'], 'query': [sys.argv[1]]}))\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "print(json.dumps({'docnos': out.column('docno').to_pylist(), 'heavy': heavy,\n"
        "                  'encoder': type(op._encoder).__name__}))\n")
    done = subprocess.run([sys.executable, "-c", script, queries()[0]], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TESSERA_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@needs_onnx
@pytest.mark.slow
def test_a_fresh_process_embeds_queries_without_importing_torch(home, index, first_run):
    result, _ = dense_in_a_fresh_process(index[0], home, timeout=300)
    assert (result["docnos"], result["heavy"]) == (rankings(first_run[1])["0"], [])


@needs_onnx
@pytest.mark.slow
def test_a_fresh_process_in_a_fresh_home_exports_before_its_first_query_and_never_imports_torch(index, first_run,
                                                                                                tmp_path):
    """A Serve replica or task worker whose first query finds no export: the export is made (in a child process)
    before the query, which then embeds on ONNX Runtime, so the process never holds torch."""
    home = tmp_path / "fresh-home"
    result, stderr = dense_in_a_fresh_process(index[0], home, timeout=600)
    assert result == {"docnos": rankings(first_run[1])["0"], "heavy": [], "encoder": "OnnxQueryEncoder"}
    assert len(list(home.glob("models/*-onnx-*/model.onnx"))) == 1 and NOTICE in stderr


@needs_onnx
@pytest.mark.slow
def test_an_unknown_encoder_choice_is_named(index, first_run, monkeypatch):
    monkeypatch.setenv(ENV, "gpu")
    with pytest.raises(OperatorError, match="TESSERA_QUERY_ENCODER='gpu' is not one of auto, torch, onnx"):
        run_dense(index[0], ["honey bees"])


def model_copy(tmp_path, edit) -> None:
    """MiniLM's configuration files (no weights) in ``tmp_path``, changed by ``edit(folder)``."""
    for file in MINILM.rglob("*.json"):
        target = tmp_path / file.relative_to(MINILM)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, target)
    edit(tmp_path)


def rewrite(file, **changes) -> None:
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))


@pytest.mark.skipif(bool(ONNX_MISSING), reason="onnxruntime or tokenizers missing")
def test_the_packaged_minilm_is_reproduced():
    plan = fast_path_plan(MINILM)
    assert {k: plan[k] for k in ("max_length", "pooling", "normalize", "dimension")} == {
        "max_length": 256, "pooling": "mean", "normalize": True, "dimension": 384}


@pytest.mark.skipif(bool(ONNX_MISSING), reason="onnxruntime or tokenizers missing")
@pytest.mark.parametrize(("edit", "reason"), [
    (lambda f: rewrite(f / "1_Pooling" / "config.json", pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True),
     "pooling 'max'"),
    (lambda f: (f / "modules.json").write_text(json.dumps(json.loads((f / "modules.json").read_text()) + [
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}])), "Dense"),
    (lambda f: rewrite(f / "config_sentence_transformers.json", prompts={"query": "q: "}, default_prompt_name="query"),
     "default prompt 'query'"),
    (lambda f: rewrite(f / "sentence_bert_config.json", do_lower_case=True), "do_lower_case"),
    (lambda f: rewrite(f / "sentence_bert_config.json", query_length=32), "sets query_length"),
    (lambda f: (f / "tokenizer.json").unlink(), "no tokenizer.json"),
])
def test_models_it_does_not_reproduce_are_refused_with_the_reason(tmp_path, edit, reason):
    model_copy(tmp_path, edit)
    with pytest.raises(FastPathUnavailable, match=reason):
        fast_path_plan(tmp_path)


@pytest.mark.skipif(bool(ONNX_MISSING), reason="onnxruntime or tokenizers missing")
def test_a_damaged_export_is_not_used(tmp_path, monkeypatch):
    from operators.models.sentence_transformers import onnx_cache_dir

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(FastPathUnavailable, match="no ONNX export"):
        load_onnx_query_encoder("all-MiniLM-L6-v2")
    folder = onnx_cache_dir(MINILM)
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(FastPathUnavailable, match="ONNX Runtime cannot load"):
        load_onnx_query_encoder("all-MiniLM-L6-v2")
    monkeypatch.setenv(ENV, "torch")
    with pytest.raises(FastPathUnavailable, match="TESSERA_QUERY_ENCODER=torch"):
        load_onnx_query_encoder("all-MiniLM-L6-v2")


@needs_onnx
@pytest.mark.slow
def test_searches_at_once_in_a_fresh_home_all_answer_while_one_of_them_exports(index, first_run, tmp_path,
                                                                               monkeypatch):
    """A replica's first searches run at once while the first exports; the export traced the shared torch model,
    and the others, encoding with it, failed (37 HTTP 500s in a soak). The export now runs in a child process, once."""
    import concurrent.futures

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    texts = queries()[:12]
    expected = rankings(first_run[1])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda text: rankings(run_dense(index[0], [text])[1])["0"], texts))
    assert found == [expected[str(i)] for i in range(len(texts))]
    assert len(list(tmp_path.glob("models/*-onnx-*/model.onnx"))) == 1



@needs_onnx
@pytest.mark.slow
def test_ingest_exports_the_query_encoder_at_its_end_unless_told_torch(tmp_path, monkeypatch, capsys):
    """``tessera ingest`` of a dense index in a fresh home makes the export and says so (the notice on stderr, the
    line in its report), so the index's first query takes the fast path; with TESSERA_QUERY_ENCODER=torch it makes
    none."""
    from flows.commands import main

    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text().splitlines()[:40]) + "\n")
    ingest = ["ingest", "--source", str(corpus), "--executor", "local", "--quiet"]
    monkeypatch.setenv(ENV, "torch")  # in-process: this process's MiniLM embeds
    assert main([*ingest, "--index", str(tmp_path / "torch"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_encoder_export"] is None
    assert not list(home.glob("models/*-onnx-*"))
    # The real command in a fresh process (auto, the default): what a user sees.
    env = {**os.environ, "TESSERA_HOME": str(home)}
    env.pop(ENV)
    done = subprocess.run([sys.executable, "-m", "flows", *ingest[:-1], "--index", str(tmp_path / "auto")],
                          capture_output=True, text=True, timeout=300, env=env)  # not --quiet, which hides notes
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count(f"tessera: {NOTICE}\n") == 1, done.stderr[-2000:]
    assert "query encoder: exported 'all-MiniLM-L6-v2' to ONNX" in done.stdout, done.stdout
    exports = list(home.glob("models/*-onnx-*/model.onnx"))
    assert len(exports) == 1
    monkeypatch.delenv(ENV)
    op, _ = run_dense(tmp_path / "auto", ["honey bees"])
    assert type(op._encoder).__name__ == "OnnxQueryEncoder"
    # Ingesting again into the index makes nothing new and says nothing about it.
    assert main([*ingest, "--index", str(tmp_path / "auto"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_encoder_export"] is None


EXPORT_SCRIPT = ("import json, sys\n"
                 "from operators.models.onnx_query_encoder import export_query_encoder\n"
                 "made = export_query_encoder(sys.argv[1], wait=True)\n"
                 "print(json.dumps({'file': made and str(made), 'torch': 'torch' in sys.modules}))\n")


def fresh_home_env(home) -> dict[str, str]:
    env = {**os.environ, "TESSERA_HOME": str(home)}
    env.pop(ENV, None)
    return env


@needs_onnx
@pytest.mark.slow
def test_the_export_runs_in_a_child_process_and_the_caller_never_imports_torch(tmp_path, monkeypatch):
    """A Ray task worker or Serve replica that asks for the export keeps only the file: torch and the exporter
    load in a child that ends with the export (a worker that exported in-process stayed at 1.2 GB RSS)."""
    done = subprocess.run([sys.executable, "-c", EXPORT_SCRIPT, "all-MiniLM-L6-v2"], capture_output=True, text=True,
                          timeout=300, env=fresh_home_env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["torch"] is False
    assert result["file"] and result["file"] == str(next(tmp_path.glob("models/*-onnx-*/model.onnx")))
    assert done.stderr.count(NOTICE) == 1
    assert not [p for p in tmp_path.glob("models/*-onnx-*/.*")], "a partial export was left"
    # the child's export is the one the fast path loads, with sentence-transformers' vectors
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    texts = queries()
    assert_same_vectors(load_onnx_query_encoder("all-MiniLM-L6-v2").encode(texts), torch_vectors(texts))


@needs_onnx
@pytest.mark.slow
def test_a_failing_export_reports_its_reason_once_and_is_not_retried(tmp_path, monkeypatch):
    """A model the fast path would reproduce but whose weights are missing: the child fails, the caller logs why
    (one line, after the notice) and does not start another child for it."""
    import operators.models.onnx_query_encoder as encoder_module
    from operators.models.onnx_query_encoder import export_query_encoder

    model = tmp_path / "no-weights"
    model_copy(model, lambda folder: None)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(encoder_module, "_TRIED", set())
    with Notices() as notices:
        assert export_query_encoder(str(model), wait=True) is None
    assert len(notices.messages) == 2, notices.messages
    assert notices.messages[0].startswith(f"preparing the torch-free query encoder for '{model}'")
    assert notices.messages[1].startswith(f"could not export '{model}' to ONNX for the query fast path: OSError: ")
    assert "no file named model.safetensors" in notices.messages[1]
    with Notices() as notices:
        started = time.perf_counter()
        assert export_query_encoder(str(model), wait=True) is None
    assert notices.messages == [] and time.perf_counter() - started < 1  # no second child
    assert not list((tmp_path / "home").glob("models/*-onnx-*/*"))
    # another home is another export folder: tried there (a process that had exported MiniLM into one test's home
    # skipped the export in every later test's fresh home, whose fast-path tests then failed, by test order)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "other"))
    with Notices() as notices:
        assert export_query_encoder(str(model), wait=True) is None
    assert len(notices.messages) == 2 and "no file named model.safetensors" in notices.messages[1], notices.messages


def child_pids(pid: int) -> list[int]:
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@needs_onnx
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child dies with its parent on Linux")
def test_a_killed_caller_leaves_no_export_child_and_no_partial_file(tmp_path):
    caller = subprocess.Popen([sys.executable, "-c", EXPORT_SCRIPT, "all-MiniLM-L6-v2"], env=fresh_home_env(tmp_path),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not child_pids(caller.pid) and time.monotonic() < deadline and caller.poll() is None:
            time.sleep(0.2)
        children = child_pids(caller.pid)
        assert children, "the export child never started"
        time.sleep(1)  # into the child's imports (its whole export takes about 10 s)
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=30)
        deadline = time.monotonic() + 5
        while [pid for pid in children if running(pid)] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in children if running(pid)], "the export child outlived its killed parent"
    finally:
        if caller.poll() is None:
            caller.kill()
    assert not list(tmp_path.glob("models/*-onnx-*/.*")), "a partial export was left"
    assert not list(tmp_path.glob("models/*-onnx-*/model.onnx")), "the child went on exporting"


@needs_onnx
def test_a_damaged_export_falls_back_saying_to_delete_it(tmp_path, caplog):
    """A cut-short model.onnx made every run warn and embed through torch, never saying how to mend it."""
    from operators.models.onnx_query_encoder import OnnxQueryEncoder

    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"\x08\x07" * 100)
    with caplog.at_level(logging.WARNING), pytest.raises(FastPathUnavailable):
        OnnxQueryEncoder(damaged, resolve_model_path("all-MiniLM-L6-v2") / "tokenizer.json", max_length=256,
                         pooling="mean", normalize=True, dimension=384)
    [warning] = [r.getMessage() for r in caplog.records if "ONNX Runtime cannot load" in r.getMessage()]
    assert str(damaged) in warning and "delete that file" in warning and "exports it again" in warning


@pytest.mark.process
def test_a_stopped_run_stops_waiting_for_the_export_child_within_a_poll():
    """`tessera run dense` in a fresh home waited for the whole 10-20 s export after Ctrl-C or SIGTERM (then loaded
    torch for the query): the wait checks the run's cancel, and the caller's cleanup ends the child."""
    from operators.errors import FlowCancelled
    from operators.interrupt import interruptible
    from operators.models.onnx_query_encoder import wait_for_child

    stopped_at = time.monotonic() + 0.5

    def check():
        if time.monotonic() >= stopped_at:
            raise FlowCancelled("interrupted (Ctrl-C)")

    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as child:
        try:
            with interruptible(check), pytest.raises(FlowCancelled):
                wait_for_child(child, 60)
            assert time.monotonic() - stopped_at < 1.0 and child.poll() is None
        finally:
            child.kill()
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('why')"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as child:
        assert wait_for_child(child, 60) == "why"
