"""Shared fixtures (the evaluation data beside the repo, a fresh step cache, one Ray, shared models and
indices) and the marker checks.

Markers (pyproject.toml) decide what ``make test-fast`` runs (``-m "not ray and not data and not slow and not
integration"``), so they are checked, not trusted:

- a test that uses ``shared_data`` or opens a file under ../shared/data must be marked ``data``;
- a test that uses ``ray_session`` or leaves Ray initialised when it was not before must be marked ``ray``;
- a test that uses the ingested sample (``sample_workspace``, ``sample_index``), has the embedded LLM write text
  or runs a torch model (MiniLM, a cross-encoder, ColBERT) in the test process must be kept out of the inner loop:
  marked ``integration`` (or ``ray``, ``data``, ``slow``).

A test that breaks a rule fails with the reason. ``slow`` (more than a few seconds) is not enforced: durations
on a shared 2-core machine are too noisy for a hard rule; the terminal summary lists the tests marked neither
``slow`` nor ``ray`` that took more than ``SLOW_SECONDS`` (setup, call and teardown together).
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

import pytest

# The service's package by its own name, bound before pytest imports tests/serve/__init__.py: under
# --import-mode=importlib that test package is imported as `serve` (tests/ is no package), and then `serve.chat.chat`
# and the rest came from wherever the editable install's finder points, so a second checkout's serve tests ran
# the first checkout's code. Bound here, `serve` is this checkout's (pyproject's pythonpath puts it first).
import serve  # noqa: E402,F401  isort: skip

# The shared flows and assertions of the Ray tests, imported by tests in other folders too: rewritten before any
# of them imports it, so its asserts say what differs wherever it is used.
pytest.register_assert_rewrite("tests.flows.ray_flows")

# Nothing in the tests may reach a model hub: models come from installed packages.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's price list: its own copy, not the web
# OpenMP threads that spin while waiting starve the other process on a 2-core machine (a Ray
# actor and the driver both running torch): measured 14 s vs 2.1 s per ColBERT training step.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Tests call services they start on 127.0.0.1, as the CLI's local policy allows (operators.outbound); the
# guard's own tests pass their policy explicitly.
os.environ.setdefault("TESSERA_OUTBOUND", "local")

# retrieve.dense's torch-free query encoder exports the encoder to ONNX in the first process that lacks the export
# (about 10 s of CPU), into each test's own TESSERA_HOME; the tests that own that path set the variable themselves.
os.environ.setdefault("TESSERA_QUERY_ENCODER", "torch")

# Ray's metrics (every Ray process exports its counters every few seconds; nothing reads them here): off for the
# tests' Rays and the Ray workers they start. The Ray tests alone took 6:54 with them, 6:23 without, and their
# processes 557 CPU-seconds against 501 (one run each, 2 idle cores, 2026-12-01; docs/testing.md).
os.environ.setdefault("RAY_enable_metrics_collection", "0")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


# -- marker checks ------------------------------------------------------------------------------------

_SHARED_PREFIX = os.path.realpath(SHARED_DATA) + os.sep
_data_reads: list[str] = []  # files under ../shared/data opened while a test not marked `data` runs
_watching_data = False


# Processes that start a program of their own (Python, `tessera`, a shell, PostgreSQL): each costs make test-fast 0.5-4
# CPU-seconds, where a unit test costs 0.03 on average (2026-12-07: 86 such tests, a third of its CPU). Other programs
# take milliseconds and are left out: git and rsync (the packaging checks, a benchmark's commit) and what a library
# asks as it is first imported, in whichever test that happens to be (`uname -p`, `ldconfig -p`); so is a bare
# `os.fork` (a pid that is soon dead, a writer killed mid-write), which runs no imports.
_process_count = 0  # such processes this process started (audit events), and what the latest ran
_last_process = ""
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.system", "os.exec", "os.spawn", "pty.spawn"})


def _costly(program: str) -> bool:
    """Whether ``program`` is Python, `tessera`, a shell or one installed in the environment (PostgreSQL's)."""
    name = os.path.basename(program)
    return name.startswith("python") or name in ("tessera", "sh", "bash") or program.startswith(sys.prefix)


def _audit(event: str, args: tuple) -> None:
    """Python's audit events (``open``, directory listings, a process started), kept on for the whole session: a
    test not marked ``data`` that reads ../shared/data in-process is noted, and so is every process started. Cheap: a
    path is resolved only when it names ``shared``."""
    global _process_count, _last_process
    if event in _PROCESS_EVENTS:
        command = args[1] if event == "subprocess.Popen" else event
        words = [str(word) for word in command] if isinstance(command, (list, tuple)) else [str(command)]
        if event != "subprocess.Popen" or _costly(words[0]):
            _process_count += 1
            _last_process = " ".join(words)
    if _watching_data and event in ("open", "os.listdir", "os.scandir") and args:
        path = args[0]
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, str) and "shared" in path and len(_data_reads) < 5:
            if (os.path.realpath(path) + os.sep).startswith(_SHARED_PREFIX):
                _data_reads.append(path)


sys.addaudithook(_audit)


_embedded_generations = 0  # replies the embedded LLM wrote in this process (observed, see _count_embedded_replies)


def _count_embedded_replies() -> None:
    """Count the embedded model's replies by wrapping ``operators.llm.embedded._complete`` (litellm's handler
    looks it up at each call); the reply itself is the model's, untouched."""
    try:
        from operators.llm import embedded
    except ImportError:  # pragma: no cover - the package is always installed for the tests
        return
    complete = embedded._complete

    def counted(**kwargs):
        global _embedded_generations
        _embedded_generations += 1
        return complete(**kwargs)

    embedded._complete = counted


_count_embedded_replies()

_torch_ran = False  # a torch module was called since the test's body began (see _arm_torch_check)
_torch_check = None  # the armed hook's handle: it removes itself at its first call


def _torch_called(module, args) -> None:
    global _torch_ran, _torch_check
    _torch_ran = True
    if _torch_check is not None:
        _torch_check.remove()  # one call is enough to know: the rest of the run pays nothing
        _torch_check = None


def _arm_torch_check() -> None:
    """Arm a global forward pre-hook that notes the next torch module call (once torch is imported)."""
    global _torch_check
    module = sys.modules.get("torch.nn.modules.module")
    if module is not None and _torch_check is None:
        _torch_check = module.register_module_forward_pre_hook(_torch_called)


class _AfterTorchLoads(importlib.abc.MetaPathFinder):
    """Arms the check as soon as torch is imported (by whichever test, perhaps in its body): importing torch here
    would cost each ``make test-fast`` worker that never runs a model 2 s of CPU. When ``torch.nn.modules.module``
    is first imported, its loader arms the hook right after the module runs; the finder is then gone."""

    def find_spec(self, name, path, target=None):
        if name != "torch.nn.modules.module":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _arm_torch_check()

        spec.loader.exec_module = exec_module
        return spec


if "torch.nn.modules.module" not in sys.modules:
    sys.meta_path.insert(0, _AfterTorchLoads())
_OUT_OF_THE_INNER_LOOP = {"integration", "ray", "data", "slow", "process"}  # the markers make test-fast leaves out
_PROCESSES_BEFORE = pytest.StashKey[int]()
_PROCESSES_AFTER_CALL = pytest.StashKey[int]()
_GENERATIONS_BEFORE = pytest.StashKey[int]()
_TORCH_IN_CALL = pytest.StashKey[bool]()


def _ray_initialised() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and getattr(ray, "is_initialized", lambda: False)())


def _freeze_after_a_full_collection(phase: str, info: dict) -> None:
    """What survives a full collection (imported modules, cached models: over a million objects in a worker)
    moves to the permanent generation, so the next full collection looks only at what the tests made since.
    A make test-fast worker spent 7-9 s in 16-19 full collections, and 2-5 s in pytest's at exit; now about 1 s.
    A frozen object that later falls into a reference cycle is not freed: a test that needs the collector calls
    ``gc.unfreeze()`` first. Not while Ray runs here: the executor frees a failed run's actors by collecting
    (``RayDataExecutor.run``), which a frozen run would escape."""
    if phase == "stop" and info["generation"] == 2 and not _ray_initialised():
        gc.freeze()


gc.callbacks.append(_freeze_after_a_full_collection)

_RAY_BEFORE = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)  # after -m has deselected what this run leaves out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker of make test's run without Ray (xdist, a file at a time), the files go in xdist's own order, most
    tests first, except that those with a test marked ``long`` go before them all: with few tests each, xdist put them
    last, and one worker spent the run's last half minute on one (the ``rag`` notebook, the package index's resolver
    then) while the other had nothing left. tests/run_suite.sh asks xdist to keep this order
    (--no-loadscope-reorder)."""
    if getattr(config.option, "dist", "no") != "loadfile" or not hasattr(config, "workerinput"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(files.values(), key=lambda tests: (not any(t.get_closest_marker("long") for t in tests),
                                                      -len(tests)))
    items[:] = [item for tests in order for item in tests]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of the test is set up: the static checks, then note whether Ray is up."""
    global _watching_data
    markers = {m.name for m in item.iter_markers()}
    if "shared_data" in item.fixturenames and "data" not in markers:
        pytest.fail(f"{item.nodeid} uses the shared_data fixture: mark it `data`", pytrace=False)
    if "ray_session" in item.fixturenames and "ray" not in markers:
        pytest.fail(f"{item.nodeid} uses the ray_session fixture: mark it `ray`", pytrace=False)
    if "sample_workspace" in item.fixturenames and not _OUT_OF_THE_INNER_LOOP & markers:
        pytest.fail(f"{item.nodeid} uses the ingested sample index: mark it `integration`", pytrace=False)
    item.stash[_GENERATIONS_BEFORE] = _embedded_generations
    item.stash[_PROCESSES_BEFORE] = _process_count
    item.stash[_RAY_BEFORE] = _ray_initialised()
    if (reachable := sys.modules.get("operators.llm.reachable")) is not None:
        reachable.forget_answers()  # a server that answered a test's check: the next test's may be down on its port
    _data_reads.clear()
    _watching_data = "data" not in markers


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Whether the test's own body called a torch module, not its fixtures' setup: a session fixture that builds a
    checkpoint (``untrained_ce`` calls the model once) would mark whichever test happens to set it up first."""
    global _torch_ran
    _torch_ran = False
    _arm_torch_check()
    yield
    item.stash[_TORCH_IN_CALL] = _torch_ran
    item.stash[_PROCESSES_AFTER_CALL] = _process_count  # not at teardown, where a session fixture's server stops


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """After the last phase of a test: fail it when it started Ray or read ../shared/data without the marker."""
    global _watching_data
    outcome = yield
    if call.when != "teardown":
        return
    report = outcome.get_result()
    markers = {m.name for m in item.iter_markers()}
    problems = []
    if "ray" not in markers and not item.stash.get(_RAY_BEFORE, True) and _ray_initialised():
        problems.append("it initialised Ray: mark it `ray` (and use the ray_session fixture)")
    if "data" not in markers and _data_reads:
        problems.append(f"it read {_data_reads[0]}: mark it `data` (and use the shared_data fixture)")
    in_the_inner_loop = not _OUT_OF_THE_INNER_LOOP & markers
    if in_the_inner_loop and _embedded_generations > item.stash.get(_GENERATIONS_BEFORE, 0):
        problems.append("the embedded LLM wrote text in it: mark it `integration`")
    if in_the_inner_loop and item.stash.get(_TORCH_IN_CALL, False):
        problems.append("a torch model ran in it: mark it `integration`")
    if in_the_inner_loop and item.stash.get(_PROCESSES_AFTER_CALL, 0) > item.stash.get(_PROCESSES_BEFORE, 1 << 62):
        problems.append(f"it started a process ({_last_process[:120]}): mark it `process`")
    _watching_data = False
    _data_reads.clear()
    if problems and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: " + "; ".join(problems)


SLOW_SECONDS = 5.0
_unmarked_slow: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not ({"slow", "ray"} & set(report.keywords)):
        _unmarked_slow[report.nodeid] = _unmarked_slow.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    slow = sorted(((t, n) for n, t in _unmarked_slow.items() if t > SLOW_SECONDS), reverse=True)
    if slow:
        terminalreporter.section(f"tests not marked slow or ray that took more than {SLOW_SECONDS:.0f} s")
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}")


def _pdf_literal(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def bm25_sample_index(path: Path, count: int) -> Path:
    """A BM25-only index at ``path`` of the first ``count`` sample documents, one shard, one chunk each (each
    document's ``docno`` its ``doc_id``)."""
    from operators.store import Index, IndexSettings
    from operators.testing import sample_documents

    index = Index.create(path, IndexSettings(dense=False))
    docs = sample_documents(count)
    index.commit([index.write_shard("a", docs.append_column("doc_id", docs.column("docno")))])
    return path


def write_pdf(path: Path, pages: list[str], title: str | None = None) -> Path:
    """A PDF with a text layer: each page's text in Helvetica, a line per 90 characters; ``title`` in its
    metadata. Written by hand (PDF 1.4: catalog, pages, font, page and content objects, info, xref), since
    no PDF writer with text is installed; pypdf reads it as any PDF."""
    import textwrap

    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
               "/Encoding /WinAnsiEncoding >>"]
    kids = []
    for text in pages:
        lines = [line for paragraph in text.split("\n") for line in (textwrap.wrap(paragraph, 90) or [""])]
        shown = " ".join(f"{_pdf_literal(line)} '" for line in lines)
        stream = f"BT /F1 10 Tf 14 TL 56 800 Td {shown} ET".encode("cp1252", "replace")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode('cp1252')}\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents {len(objects)} 0 R "
                       "/Resources << /Font << /F1 3 0 R >> >> >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    if title:
        objects.append(f"<< /Title {_pdf_literal(title)} >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("cp1252")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    info = f" /Info {len(objects)} 0 R" if title else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


@pytest.fixture(scope="session")
def pdf_writer():
    """``write_pdf(path, pages, title=None)``: a real PDF with a text layer, for the PDF readers' tests."""
    return write_pdf


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present at {SHARED_DATA}: evaluation data is not on this machine")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module's tests, restored afterwards: its OpenMP threads spin while they
    wait, and on a loaded 2-core machine a ColBERT training step took 14 s on two threads, 1.3 s on one.
    Modules that train or encode with torch say ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    Where torch is not imported yet and ``OMP_NUM_THREADS`` is 1 (make test-fast), torch takes one thread when a test
    imports it, so this leaves torch unimported: most of these modules' unit tests never touch it, and importing it
    cost each test-fast worker about 2 CPU-seconds."""
    if "torch" not in sys.modules and os.environ.get("OMP_NUM_THREADS") == "1":
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cache(tmp_path):
    from flows.cache import StepCache

    return StepCache(tmp_path / "cache")


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (2 CPUs) for the whole session; started on first use, stopped at the end."""
    import logging

    import ray

    from flows.executors.ray_env import keep_workers_at_driver_niceness

    started = not ray.is_initialized()
    if started:
        # Its workers at the driver's niceness, as in a Ray that Tessera starts (Ray's own default is 15): make test
        # runs the other tests beside these under `nice -n 10`, which took the cores from Ray's workers at 15.
        keep_workers_at_driver_niceness()
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def executor_kind(request):
    """Run a test on each executor; the Ray one shares the session's Ray."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


@pytest.fixture
def make_executor(executor_kind):
    """A factory of the executor under test: ``make_executor(cache=...)``."""

    def make(**kwargs):
        if executor_kind == "ray":
            from flows.executors.ray_data import RayDataExecutor

            return RayDataExecutor(**kwargs)
        from flows.executors.local import LocalExecutor

        return LocalExecutor(**kwargs)

    return make


@pytest.fixture(scope="session")
def untrained_ce(tmp_path_factory) -> Path:
    """A real CrossEncoder checkpoint on disk (the packaged MiniLM with a seeded, untrained head) for every test that
    needs one (the rerankers, the rerank flow, Serve, training). Written once per run, by the first process that
    needs it, under a file lock (as ``sample_workspace``); the others read it. Read-only: a test that changes a
    checkpoint saves its own copy."""
    from filelock import FileLock

    from operators.testing import untrained_cross_encoder

    shared = _shared_between_processes(tmp_path_factory)
    with FileLock(str(shared / "untrained-ce.lock")):
        return untrained_cross_encoder(shared / "untrained-ce")


@pytest.fixture(scope="session")
def static_folder(tmp_path_factory) -> Path:
    """A static model folder (what ``tessera train --model static`` saves): MiniLM's tokenizer and seeded
    random 16-d token vectors, built in a second (what these tests check does not depend on the vectors)."""
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding
    from tokenizers import Tokenizer

    from operators.models import resolve_model_path

    tokenizer = Tokenizer.from_file(str(resolve_model_path("minilm") / "tokenizer.json"))
    weights = np.random.default_rng(0).standard_normal((tokenizer.get_vocab_size(), 16)).astype(np.float32)
    folder = tmp_path_factory.mktemp("static") / "tiny-static"
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights), Normalize()],
                        device="cpu").save(str(folder))
    return folder


def _shared_between_processes(tmp_path_factory) -> Path:
    """A folder every test process of this run sees: ``TESSERA_TEST_SHARED`` where ``make test`` sets it (one folder
    for its two pytest runs, removed after them), else the folder pytest-xdist's workers share, else this
    session's own temporary folder."""
    if os.environ.get("TESSERA_TEST_SHARED"):
        return Path(os.environ["TESSERA_TEST_SHARED"])
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def sample_workspace(tmp_path_factory) -> Path:
    """A folder laid out as a clone after ``make demo``: ``data/sample`` (a copy of the bundled
    sample) and ``.tessera/indices/sample``, ingested as ``make demo`` and the README's Python tour
    do it (the built-in ingest spec: chunked, BM25 + MiniLM, flat; 250 documents a shard), with the
    local executor. Built once per run, by the first process that needs it, under a file lock; the others
    wait for it and read it (about 25 s each saved). Read-only: a test that changes an index ingests its own."""
    import shutil

    from filelock import FileLock

    from flows.ingestion import ingest

    shared = _shared_between_processes(tmp_path_factory)
    root, built = shared / "sample-workspace", shared / "sample-workspace.built"
    with FileLock(str(shared / "sample-workspace.lock")):
        if not built.exists():
            shutil.rmtree(root, ignore_errors=True)  # a build a killed process left unfinished
            shutil.copytree(REPO / "data" / "sample", root / "data" / "sample")
            ingest(root / "data" / "sample" / "corpus.jsonl", root / ".tessera" / "indices" / "sample",
                   spec="ingest", shard_size=250, executor="local", progress=False)
            built.touch()
    return root


@pytest.fixture(scope="session")
def sample_index(sample_workspace) -> Path:
    """The bundled sample's index (see ``sample_workspace``)."""
    return sample_workspace / ".tessera" / "indices" / "sample"


@pytest.fixture(scope="session")
def llm_fault_server():
    """The local OpenAI-compatible fault server (operators.llm.testing), one for the session."""
    from operators.llm.testing import FaultServer

    with FaultServer() as server:
        yield server


@pytest.fixture
def fault_models(llm_fault_server, tmp_path, monkeypatch):
    """The fault server's aliases (``fault-ok``, ``fault-error``, ...) in force, its key set; the server reset."""
    from operators.llm.testing import KEY_ENV

    llm_fault_server.reset()
    llm_fault_server.reply = "Honey bees make honey [1].\nSources: 1"
    monkeypatch.setenv("TESSERA_MODELS", str(llm_fault_server.models_file(tmp_path / "models.yaml")))
    monkeypatch.setenv(KEY_ENV, "sk-fault-test")
    return llm_fault_server


@pytest.fixture
def plugin_module(tmp_path, monkeypatch, isolated_registry):
    """``plugin_module(prefix, source)``: ``source`` written as a module of its own (named after ``prefix`` and the
    test), importable, named in ``TESSERA_OPERATORS``, no bytecode written (a test that edits it is read again);
    returns the module's name. The registry is the test's own (``isolated_registry``)."""
    import sys

    def load(prefix: str, source: str) -> str:
        plugins = tmp_path / "plugins"
        plugins.mkdir(exist_ok=True)
        module = f"{prefix}_{tmp_path.name.replace('-', '_')}"
        (plugins / f"{module}.py").write_text(source)
        monkeypatch.syspath_prepend(str(plugins))
        monkeypatch.setenv("TESSERA_OPERATORS", module)
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
        return module

    return load


@pytest.fixture
def isolated_registry(monkeypatch):
    """An empty operator registry for the test, found again on first use and restored after it, with no
    ``TESSERA_OPERATORS``: a plugin the test loads is never seen by another test (``tessera ops``, the contract
    coverage check and the unknown-operator hint read the whole registry)."""
    from operators import registry

    for attr, value in (("_registry", {}), ("_origins", {}), ("_skipped", {}), ("_loaded", False),
                        ("_env_modules", set()), ("_no_entry_points", False)):
        monkeypatch.setattr(registry, attr, value)
    monkeypatch.delenv(registry.ENV_VAR, raising=False)
    return registry
