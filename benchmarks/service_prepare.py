"""Per-request cost of the flow service before anything runs: ``Service.prepare`` and the ``/v1/models`` flow cards.

In one process, nothing served (no Ray): a ``Service`` over a temporary ``$TESSERA_HOME`` holding a copy of the
sample index (named ``news``, made through the service by ``alice``, who asks) and ``--indices`` more rows in the
task store's ``indices`` table, with the deployments of ``serve/config.yaml`` listed as served (MiniLM, a
cross-encoder, SmolLM2 for the ``local`` alias), so placement does its real work. Timed, interleaved call by call:

* ``search``: ``prepare({"flow": "rag", "query": ..., "index": "news"}, search=True)`` (``POST /v1/search``);
* ``chat``: ``prepare`` of the body a chat completion builds (the ``rag`` spec inline, as ``chat_flows`` sends it);
* ``models``: ``chat_flows.flow_cards`` with the models' live cards, what ``GET /v1/models`` adds per call.

Printed per kind: microseconds per call (wall p50 and mean, the process's CPU mean), and per call the
``FlowSpec.build`` calls, the walks of the body for lone surrogates (``first_broken_text``), the reads of a models
(alias) file, and the SQL statements with the rows they returned. Old against new: ``--serve-from DIR`` imports
``serve`` from another folder (the committed one: ``mkdir -p /tmp/old && git archive HEAD serve | tar -x -C
/tmp/old``), everything else from here; run both, one after the other (one process holds one ``serve``).
``--cache-models-files``: each models file read once per version, patched in here to size a change proposed for
``operators/llm/aliases.py`` (which reads the files again on every alias it resolves).

    .venv/bin/python benchmarks/service_prepare.py [--calls 300] [--indices 500] [--serve-from /tmp/old]
        [--cache-models-files]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import REPO_ROOT

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

QUERY = "how do honey bees communicate"


def counted(counts: Counter, key: str, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        counts[key] += 1
        return function(*args, **kwargs)
    return wrapper


def cache_models_files() -> None:
    """``operators.llm.aliases.read_models_file`` once per version of a file: what the proposed change would do."""
    aliases = importlib.import_module("operators.llm.aliases")
    read = functools.lru_cache(maxsize=16)(lambda path, version: aliases._read_uncached(path))
    aliases._read_uncached = aliases.read_models_file

    def cached(path: Path):
        stat = path.stat()
        return dict(read(path, (stat.st_mtime_ns, stat.st_size, stat.st_ino)))  # a copy: aliases() updates it

    aliases.read_models_file = cached


def instrument(counts: Counter, store) -> None:
    """Count spec builds, surrogate walks, models-file reads and SQL statements (with their rows) from here on."""
    import sqlalchemy as sa

    from flows.spec import FlowSpec

    aliases, unicode = importlib.import_module("operators.llm.aliases"), importlib.import_module("operators.unicode")
    FlowSpec.build = counted(counts, "spec builds", FlowSpec.build)
    reader = "_read_uncached" if hasattr(aliases, "_read_uncached") else "read_models_file"  # calls, not cache hits
    setattr(aliases, reader, counted(counts, "models-file reads", getattr(aliases, reader)))
    walk = unicode.first_broken_text
    wrapped = counted(counts, "surrogate walks", walk)
    for module in list(sys.modules.values()):  # every `from operators.unicode import first_broken_text`
        if getattr(module, "first_broken_text", None) is walk:
            module.first_broken_text = wrapped

    @sa.event.listens_for(store.engine, "after_cursor_execute")
    def _executed(conn, cursor, statement, parameters, context, executemany):
        counts["SQL statements"] += 1

    # rows fetched, whichever way a result is read (all, one, or iterated)
    result = sa.engine.CursorResult
    fetchall, fetchone, fetchiter = result._fetchall_impl, result._fetchone_impl, result._fetchiter_impl

    def all_rows(self):
        rows = fetchall(self)
        counts["SQL rows"] += len(rows)
        return rows

    def one_row(self, hard_close=False):
        row = fetchone(self, hard_close)
        counts["SQL rows"] += row is not None
        return row

    def each_row(self):
        for row in fetchiter(self):
            counts["SQL rows"] += 1
            yield row

    result._fetchall_impl, result._fetchone_impl, result._fetchiter_impl = all_rows, one_row, each_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="timed calls per kind")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per kind first")
    parser.add_argument("--indices", type=int, default=500, help="other indices' rows in the task store")
    parser.add_argument("--serve-from", type=Path, default=None, help="import `serve` from this folder's serve/")
    parser.add_argument("--cache-models-files", action="store_true",
                        help="read each models (alias) file once per version (path, mtime, size), as a proposed "
                        "change to operators/llm/aliases.py would; patched in here, not in the code")
    args = parser.parse_args()
    if args.serve_from is not None:
        sys.path.insert(0, str(args.serve_from.resolve()))

    from _serve import sample_index

    home = Path(tempfile.mkdtemp(prefix="tessera-prepare-"))
    os.environ["TESSERA_HOME"] = str(home)
    try:
        run(args, home, sample_index())
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, home: Path, index: Path) -> None:
    import serve
    from flows.spec import FlowSpec
    from serve.chat import chat_flows
    from serve.schemas import ModelCard
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    print(f"serve imported from {Path(serve.__file__).parent}")
    shutil.copytree(index, home / "indices" / "news")
    service_args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{home}/tasks.db")
    served = [
        {"deployment": "all-MiniLM-L6-v2", "kind": "embedding", "op": "embed.sentence_transformer",
         "params": {"model": "all-MiniLM-L6-v2"}},
        {"deployment": "tessera-cross-encoder", "kind": "rerank", "op": "rerank.cross_encoder",
         "params": {"model": "tessera-cross-encoder"}},
        {"deployment": "smollm2", "kind": "llm", "engine": "llama_cpp", "model": "smollm2-135m-instruct"},
    ]
    service = Service(resolve(service_args, environ={}), served, "tessera")
    for i, name in enumerate(["news", *(f"other{n}" for n in range(args.indices))]):
        owner = "alice" if i == 0 else f"key{i % 7}"
        task, why = service.store.create_ingest_task(owner, name, "ingest", {"documents": 1}, ["ingest"], limit=10**9)
        assert why == "ok", why
        service.store.finish(task, "finished")
    live = [ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status="ready"),
            ModelCard(id="all-MiniLM-L6-v2", type="embedding", operator="embed.sentence_transformer",
                      deployment="all-MiniLM-L6-v2", status="ready")]
    chat_body = {"flow": FlowSpec.load("rag").to_dict(), "query": QUERY}
    kinds = {
        "search": lambda: service.prepare({"flow": "rag", "query": QUERY, "index": "news"}, "alice", search=True),
        "chat": lambda: service.prepare(chat_body, "alice"),
        "models": lambda: chat_flows.flow_cards("alice", live),
    }
    assert {card.id for card in kinds["models"]()} >= {"rag"}
    counts = {kind: Counter() for kind in kinds}
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu_times: dict[str, list[float]] = {kind: [] for kind in kinds}  # steadier than wall time on a busy machine
    if args.cache_models_files:
        cache_models_files()
    for _ in range(args.warmup):
        for call in kinds.values():
            call()
    current = Counter()
    instrument(current, service.store)
    for _ in range(args.calls):
        for kind, call in kinds.items():
            current.clear()
            started, cpu = time.perf_counter(), time.process_time()
            call()
            times[kind].append(1e6 * (time.perf_counter() - started))
            cpu_times[kind].append(1e6 * (time.process_time() - cpu))
            counts[kind].update(current)
    keys = ["spec builds", "surrogate walks", "models-file reads", "SQL statements", "SQL rows"]
    print(f"{args.calls} calls per kind, {args.indices + 1} index rows in the store"
          + (", models files read once per version (patched)" if args.cache_models_files else ""))
    print(f"{'kind':<8} {'p50 us':>9} {'mean us':>9} {'cpu us':>9}  " + "  ".join(f"{key:>17}" for key in keys))
    for kind in kinds:
        per_call = "  ".join(f"{counts[kind][key] / args.calls:>17.1f}" for key in keys)
        print(f"{kind:<8} {statistics.median(times[kind]):>9.0f} {statistics.mean(times[kind]):>9.0f} "
              f"{statistics.mean(cpu_times[kind]):>9.0f}  {per_call}")


if __name__ == "__main__":
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    main()
