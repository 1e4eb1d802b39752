"""Ingest the scale corpus end to end with the static embedder: time per stage, peak RSS, a kill and a resume.

The corpus is benchmarks/build_scale_corpus.py's (built first when absent; ``--count`` documents,
the card's 916,618 by default), or ``--corpus FILE``'s first ``--count`` documents (all by default).
Ingestion (read, chunk, embed, sharded FAISS + BM25 + doc store, ``--spec ingest_static``) runs in a
child process; this process samples the resident memory of the child and everything under it (Ray's
processes too) every half second and keeps the peak.
With ``--kill-at F`` the child is killed (SIGKILL, its whole process group) once a fraction F of
the documents are embedded, then the same ingestion is run again to resume it. At the end every
committed chunk is read back: the distinct source documents must be exactly the corpus's (none
lost) and no chunk id may repeat (none duplicated). ``--profile`` runs the child under cProfile
(local executor) and prints where the time went. Goals (issue 33): < 10 minutes wall on 2 cores
for 916K documents, peak RSS <= 4 GB, resumable.

    .venv/bin/python benchmarks/ingest_scale.py                          # 916,618 documents (the quiet-machine run)
    nice -n 10 .venv/bin/python benchmarks/ingest_scale.py --count 100000 --kill-at 0.5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from build_scale_corpus import CARD_COUNT, build, default_out  # also puts the repo on sys.path
from _common import DATA

#: Seconds between two lines of ``monitor-<run>.jsonl`` (load average, resident memory and CPU of the process tree).
MONITOR_SECONDS = 5.0


def busy_seconds() -> dict[str, float]:
    """Seconds spent in each stage of the local executor's ingestion, summed over its shards, filled in as it runs.

    Reading, chunking and embedding a shard run on one thread while the driver writes and commits the one before,
    so the stages overlap: the busiest thread bounds the wall time, and these sums say which one it is."""
    import flows.ingestion.job as job

    busy: dict[str, float] = {}

    def timed(owner, name: str, stage: str) -> None:
        work = getattr(owner, name)

        @functools.wraps(work)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                busy[stage] = busy.get(stage, 0.0) + time.perf_counter() - started

        setattr(owner, name, wrapper)

    for owner, name, stage in ((job, "staged_unless_done", "read"), (job, "prepare", "chunk"),
                               (job.Embedder, "__call__", "embed"), (job, "write", "write"),
                               (job._Run, "_commit", "commit")):
        timed(owner, name, stage)
    return busy


def child(args: argparse.Namespace) -> int:
    """The ingestion itself: a progress event per stage change goes to ``stages.jsonl``, the report to stdout."""
    from flows.ingestion import ingest

    log = open(args.work / f"stages-{args.run}.jsonl", "a", encoding="utf-8")
    seen: dict[str, float] = {}

    def on_progress(event) -> None:
        now = time.time()
        if event.stage not in seen or now - seen[event.stage] > 1.0:
            seen[event.stage] = now
            log.write(json.dumps({"t": now, "stage": event.stage, "docs": event.docs, "total": event.docs_total,
                                  "shards": event.shards}) + "\n")  # docs: embedded; shards: committed
            log.flush()

    if args.executor == "ray":  # each shard's seconds in its write actor, as its result reaches the driver
        log_written(log)

    def run():
        return ingest(str(args.corpus), str(args.index), spec=args.spec, executor=args.executor,
                      shard_size=args.shard_size, progress=False, on_progress=on_progress)

    busy = {} if args.profile else busy_seconds()
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        report = profile.runcall(run)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(20)
    else:
        report = run()
    print(json.dumps({**report.to_dict(), "busy_s": {k: round(v, 1) for k, v in busy.items()}}), flush=True)
    return 0


def log_written(log) -> None:
    """A ``written`` line in ``log`` per shard result that reaches the driver from Ray's write actors: the seconds
    the actor spent writing it, beside when the driver got it (a slow writer and a starved one look different)."""
    from flows.ingestion.shards import ShardResult

    from_row = ShardResult.from_row.__func__

    def logged(cls, row):
        result = from_row(cls, row)
        log.write(json.dumps({"t": time.time(), "stage": "written", "shard": result.shard, "chunks": result.chunks,
                              "write_s": round(result.seconds, 2)}) + "\n")
        log.flush()
        return result

    ShardResult.from_row = classmethod(logged)


def tree_usage(process, cpu: dict[int, float], names: dict[int, str]) -> int:
    """The resident memory of ``process`` and everything under it; ``cpu`` keeps each one's latest CPU seconds,
    ``names`` its title (Ray's workers name their actor class there)."""
    import psutil

    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_info().rss
            times = p.cpu_times()
            cpu[p.pid] = times.user + times.system
            names[p.pid] = " ".join(p.cmdline())[:60].strip() or p.name()  # a Ray worker's changes with its actor
        except psutil.Error:
            pass
    return total


def cpu_by_title(cpu: dict[int, float], names: dict[int, str], before: dict[int, float]) -> dict[str, float]:
    """CPU seconds since ``before`` per process title (the busiest first), and ``before`` brought up to date."""
    spent: dict[str, float] = {}
    for pid, seconds in cpu.items():
        title = names.get(pid, str(pid))
        spent[title] = spent.get(title, 0.0) + seconds - before.get(pid, 0.0)
        before[pid] = seconds
    return {title: round(s, 1) for title, s in sorted(spent.items(), key=lambda kv: -kv[1]) if s >= 0.1}


def run_child(args: argparse.Namespace, argv: list[str], run: int, kill_at: float | None) -> dict:
    """One ingestion run in a child process group; its wall time, peak RSS, report, and whether it was killed."""
    import psutil

    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", "--run", str(run), *argv], stdout=subprocess.PIPE,
                            start_new_session=True, text=True)
    process, peak, killed, loads, cpu, names, noted_cpu = psutil.Process(proc.pid), 0, False, [], {}, {}, {}
    monitor, noted = open(args.work / f"monitor-{run}.jsonl", "a", encoding="utf-8"), 0.0
    while proc.poll() is None:
        rss = tree_usage(process, cpu, names)
        peak = max(peak, rss)
        loads.append(os.getloadavg()[0])
        if time.time() - noted >= MONITOR_SECONDS:  # how the run went, also for one cut short
            noted = time.time()
            monitor.write(json.dumps({"t": noted, "load": loads[-1], "rss_gb": round(rss / 1e9, 2),
                                      "cpu_s": round(sum(cpu.values()), 1), "processes": len(cpu),
                                      "cpu_by": cpu_by_title(cpu, names, noted_cpu)}) + "\n")
            monitor.flush()
        if kill_at is not None and embedded_fraction(args.work / f"stages-{run}.jsonl") >= kill_at:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.5)
    monitor.close()
    out = proc.communicate()[0]
    if proc.returncode not in (0, -signal.SIGKILL):
        raise SystemExit(f"ingestion failed (exit {proc.returncode})")
    report = json.loads(out.strip().splitlines()[-1]) if not killed and out.strip() else {}
    return {"seconds": time.perf_counter() - started, "peak_rss_gb": peak / 1e9, "killed": killed,
            "load": (sum(loads) / len(loads), max(loads)) if loads else (0.0, 0.0),
            "cpu_s": sum(cpu.values()),  # as last sampled (every half second)
            "report": report, "stages": stage_seconds(args.work / f"stages-{run}.jsonl")}


def embedded_fraction(path: Path) -> float:
    if not path.is_file():
        return 0.0
    lines = path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines if '"ingest"' in line]
    return events[-1]["docs"] / max(1, events[-1]["total"] or 1) if events else 0.0


def stage_seconds(path: Path) -> dict[str, float]:
    """Seconds between each stage's first and last progress event in one run."""
    spans: dict[str, list[float]] = {}
    for line in (path.read_text(encoding="utf-8").splitlines() if path.is_file() else []):
        event = json.loads(line)
        span = spans.setdefault(event["stage"], [event["t"], event["t"]])
        span[1] = event["t"]
    return {stage: round(last - first, 1) for stage, (first, last) in spans.items()}


def verify(index: Path, corpus: Path) -> dict:
    """Distinct source documents and chunk ids committed, against the corpus's ids."""
    import pyarrow.parquet as pq

    from operators.store import Index

    ids: set[str] = set()
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            ids.add(json.loads(line)["_id"])
    docnos, doc_ids = 0, set()
    distinct: set[str] = set()
    for shard in sorted(s.id for s in Index.open(index).manifest.shards):
        table = pq.read_table(index / "shards" / shard / "docs.parquet", columns=["docno", "doc_id"])
        chunk_ids = table.column("docno").to_pylist()
        docnos += len(chunk_ids)
        distinct.update(chunk_ids)
        doc_ids.update(table.column("doc_id").cast("string").to_pylist())
    return {"documents": len(ids), "documents_indexed": len(doc_ids & ids), "lost": len(ids - doc_ids),
            "chunks": docnos, "duplicate_chunks": docnos - len(distinct)}


def first_documents(corpus: Path, count: int, out: Path) -> int:
    """The first ``count`` documents (non-blank lines) of ``corpus`` written to ``out``, so that ``--count`` limits a
    ``--corpus`` too (it was ingested whole) and ``verify`` checks what was ingested; returns how many there were."""
    written = 0
    with open(corpus, "rb") as source, open(out, "wb") as target:
        for line in source:
            if written == count:
                break
            if line.strip():
                target.write(line if line.endswith(b"\n") else line + b"\n")
                written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, help=f"documents: the first COUNT of --corpus (default all of it), else "
                        f"the built scale corpus of COUNT (default {CARD_COUNT:,})")
    parser.add_argument("--corpus", type=Path, help="corpus.jsonl (default: the built scale corpus of --count)")
    parser.add_argument("--work", type=Path, help="index and logs (default $TESSERA_HOME/bench/ingest-scale-COUNT, "
                        "or ingest-scale-corpus for all of --corpus)")
    parser.add_argument("--spec", default="ingest_static")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--shard-size", type=int, default=5000)
    parser.add_argument("--kill-at", type=float, help="kill the run at this fraction embedded, then resume it")
    parser.add_argument("--profile", action="store_true", help="cProfile the (local) ingestion, to stderr")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.count is not None and args.count <= 0:
        parser.error(f"--count must be positive, not {args.count}")
    from operators.home import tessera_home

    given = args.corpus is not None and not args.child  # the child gets the parent's cut of it
    if args.corpus is None:
        args.count = args.count or CARD_COUNT
    args.work = (args.work or tessera_home() / "bench" / f"ingest-scale-{args.count or 'corpus'}").expanduser()
    args.work = args.work.resolve()
    args.index = args.work / "index"
    if args.corpus is None:
        folder = default_out(args.count, 0)
        if not (folder / "corpus.jsonl").is_file():
            build(folder, args.count, 0, DATA)
        args.corpus = folder / "corpus.jsonl"
    if args.child:
        return child(args)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    if given and args.count is not None:
        found = first_documents(args.corpus, args.count, args.work / "corpus.jsonl")
        if found < args.count:
            parser.error(f"--count {args.count:,}: --corpus {args.corpus} holds only {found:,} documents")
        args.corpus = args.work / "corpus.jsonl"
    argv = ["--corpus", str(args.corpus), "--work", str(args.work), "--spec", args.spec, "--executor", args.executor,
            "--shard-size", str(args.shard_size), *(["--profile"] if args.profile else [])]
    runs = [run_child(args, argv, 1, args.kill_at)]
    if runs[0]["killed"]:
        runs.append(run_child(args, argv, 2, None))
    for n, run in enumerate(runs, 1):
        what = "killed" if run["killed"] else f"{run['report'].get('docs', 0):,} documents"
        print(f"run {n}: {run['seconds']:.1f} s wall, {run['cpu_s']:.0f} s CPU, peak RSS {run['peak_rss_gb']:.2f} GB "
              f"({what}), 1-min load average mean {run['load'][0]:.1f} max {run['load'][1]:.1f} on {os.cpu_count()} "
              f"cores; stages (first to last progress event, s): {run['stages']}; busy seconds per stage (local "
              f"executor): {run['report'].get('busy_s', {})}")
    check = verify(args.index, args.corpus)
    print(f"index: {check}")
    total = sum(r["seconds"] for r in runs)
    documents = check["documents"]
    print(f"{documents:,} documents in {total:.1f} s wall ({documents / total:,.0f} docs/s), peak RSS "
          f"{max(r['peak_rss_gb'] for r in runs):.2f} GB; none lost: {check['lost'] == 0}, "
          f"none duplicated: {check['duplicate_chunks'] == 0}")
    return 0 if check["lost"] == 0 and check["duplicate_chunks"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
