"""``tessera bench`` / ``python -m flows.bench``: benchmark flows on a BEIR-layout dataset (see ``flows.bench``)."""

from __future__ import annotations

import argparse
from typing import Sequence

from flows import uris
from flows.bench.errors import BenchError
from flows.commands._support import (EXIT_CANCELLED, add_cache_dir_argument, console, positive_int, print_json,
                                     refuse_cache_dir_without_cache, require_extra, rewritten_logs)
from flows.commands.job_paths import check_job_paths, in_ray_job, relative_lands
from flows.commands.ingest_interrupt import StopOnInterrupt, typed_command

DESCRIPTION = ("Benchmark flows on a BEIR-layout dataset (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv): one "
               "search per flow, nDCG/MRR/MAP/P/R/F1/perfect recall at every cutoff, paired significance "
               "tests against baselines, report.md with plots, metrics.json, MLflow runs.")
EPILOG = "Example: tessera bench --dataset DIR --flow bm25=bm25 --flow dense=dense --out bench-out"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, metavar="DIR", help="BEIR-layout dataset folder")
    parser.add_argument("--flow", action="append", required=True, metavar="NAME=SPEC", dest="flows",
                        help="a flow to benchmark: NAME=spec file, built-in or saved flow (repeat; NAME alone "
                        "means NAME=NAME)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (report, metrics, runs)")
    parser.add_argument("--split", default="test", help="qrels split: qrels/SPLIT.tsv (default: test)")
    parser.add_argument("--k", default="1,3,5,10,100", metavar="K,K,...",
                        help="cutoffs (default 1,3,5,10,100); flows should retrieve at least the largest")
    parser.add_argument("--baseline", action="append", dest="baselines", metavar="NAME",
                        help="flow the others are tested against (repeat; default: the first flow)")
    parser.add_argument("--test", choices=("t", "wilcoxon"), default="t",
                        help="paired test: t (paired t-test, default) or wilcoxon (signed-rank)")
    parser.add_argument("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"), default="holm",
                        help="multiple-comparison correction over the non-baseline flows (default holm)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="where flows run (default local)")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N judged queries")
    parser.add_argument("--min-relevance", type=positive_int, default=1, metavar="N",
                        help="binary measures (all but nDCG) count a document relevant when judged N or above "
                        "(default 1; TREC DL uses 2)")
    parser.add_argument("--index-dir", metavar="DIR",
                        help="where built indices live (default $TESSERA_HOME/indices/auto)")
    parser.add_argument("--index", dest="own_index", help=argparse.SUPPRESS)  # refused in handle, saying why
    parser.add_argument("--no-cache", action="store_true",
                        help="rerun every flow (ignore cached runs; no step cache)")
    add_cache_dir_argument(parser)  # the step cache's folder, as tessera run's
    parser.add_argument("--mlflow-uri", metavar="URI",
                        help="MLflow tracking URI (default: sqlite:///OUT/mlflow.db, artifacts in OUT/mlartifacts)")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument("--json", action="store_true",
                        help="print the summary (every flow's measure means, run times) and the output paths as JSON")


def parse_ks(text: str) -> list[int]:
    try:
        ks = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise BenchError(f"bad --k value '{text}': give comma-separated positive cutoffs, e.g. 1,3,5,10,100",
                         field="k") from None
    if not ks or min(ks) <= 0:
        raise BenchError(f"bad --k value '{text}': give comma-separated positive cutoffs, e.g. 1,3,5,10,100",
                         field="k")
    return ks


def handle(args: argparse.Namespace) -> int:
    if args.own_index is not None:  # as tessera run's: it was taken for --index-dir and built indices in that folder
        raise BenchError(f"tessera bench searches no index of yours ('{args.own_index}'): it builds each flow's "
                         "index from --dataset's corpus.jsonl, so that every flow is measured on the same "
                         "documents (--index-dir DIR: the folder those are kept in). To measure a flow over your "
                         "index, run it with tessera run FLOW --index NAME --queries QUERIES --out run.trec and "
                         "score run.trec against the dataset's qrels", field="--index")
    if args.no_mlflow and args.mlflow_uri:
        raise BenchError("--mlflow-uri and --no-mlflow: give one (where to log, or not to log)", field="mlflow-uri")
    refuse_cache_dir_without_cache(args)
    check_job_paths(outputs={"--out": args.out, "--index-dir": args.index_dir, "--cache-dir": args.cache_dir},
                    inputs={"--dataset": args.dataset}, executor=args.executor)
    refuse_relative_store_in_job(args.mlflow_uri)
    from flows.bench import tracking

    require_extra("bench", ("ir_measures", "statsmodels", "matplotlib", "torchmetrics")
                  + (() if args.no_mlflow else tracking.required_modules(args.mlflow_uri)))
    from flows.bench.console import BenchReporter
    from flows.bench.core import BenchOptions, benchmark, reads_back
    from flows.train import train_command

    # As ``tessera ingest``: a second Ctrl-C during an index build exits at once, and the first says how to resume
    # (the finished flows' saved runs, the index shards committed); --no-cache would run every flow again.
    interrupts = StopOnInterrupt(typed_command(args, [args.dataset, args.out], without=("--no-cache",)),
                                 "run it again without --no-cache (which runs every flow anew)" if args.no_cache
                                 else "run the same command again",
                                 "submit it again as a Ray job without --no-cache (which runs every flow anew)"
                                 if args.no_cache else "submit the same Ray job again")
    # A remote --out resumes as a local one: its saved runs and default MLflow store are copied down first.
    kept = reads_back(cache=not args.no_cache, default_store=not args.no_mlflow and not args.mlflow_uri)
    try:
        with interrupts, uris.local_input(args.dataset, "dataset") as dataset, \
                uris.local_output(args.out, "out", reads_back=kept) as out:
            options = BenchOptions(dataset=dataset, flows=args.flows, out=out, split=args.split,
                                   ks=parse_ks(args.k), baselines=args.baselines, test=args.test,
                                   correction=args.correction, executor=args.executor, limit=args.limit,
                                   min_relevance=args.min_relevance,
                                   index_dir=uris.local_path(args.index_dir, "index-dir"),
                                   cache_dir=uris.local_path(args.cache_dir, "cache-dir"),
                                   cache=not args.no_cache, mlflow=not args.no_mlflow, mlflow_uri=args.mlflow_uri,
                                   out_shown=args.out if uris.is_uri(args.out) else None)
            reporter = BenchReporter(enabled=not args.quiet)
            with rewritten_logs("tessera.ingest", _bench_advice):
                result = benchmark(options, reporter, how_to_make=train_command)
    except KeyboardInterrupt:  # finished runs and committed index shards stay: the same command resumes
        interrupts.announce()
        return EXIT_CANCELLED
    if args.json:
        print_json(summary_data(result))
    else:
        _print_summary(result)
    return 0


def refuse_relative_store_in_job(uri: str | None) -> None:
    """In a Ray job, a ``--mlflow-uri`` whose store is a relative path (``sqlite:///mlflow.db``, ``file:mlruns``) would
    be written into the job's working folder (a temporary copy Ray deletes, or the folder of ``ray start``): refused
    before anything runs, as a relative ``--out`` is. The default store is in ``--out``, checked there."""
    from pathlib import Path

    from flows.bench.tracking import store_path

    store = store_path(uri)
    if not in_ray_job() or store is None or Path(store).expanduser().is_absolute():
        return
    raise BenchError(f"--mlflow-uri '{uri}' names a relative path ({store}): in a Ray job the store would be written "
                     f"{relative_lands()}; give an absolute path the cluster can write (sqlite:////abs/path/mlflow.db, "
                     "four slashes), a tracking server, or leave --mlflow-uri out to log into --out's mlflow.db",
                     field="mlflow-uri")


def _bench_advice(record) -> None:
    """A record the ingestion of a benchmark's index left out is fixed in the corpus file, after which the benchmark
    builds a new index (its key is the corpus's hash): not by a retry, which the ingestion's warning advises."""
    from flows.ingestion.staging import RETRY_ADVICE

    if isinstance(record.msg, str):
        record.msg = record.msg.replace(RETRY_ADVICE, "fix them in the corpus: the next benchmark builds its index "
                                        "again")


def summary_data(result) -> dict:
    """The summary table's figures as data: per flow every measure's mean and how its run went, and the files."""
    from flows.bench.report import headline_k

    return {"dataset": result.dataset.name, "split": result.dataset.split, "queries": len(result.dataset.qids),
            "k": headline_k(result.ks), "ks": list(result.ks), "baselines": list(result.baselines),
            "flows": {flow: {"measures": {m: float(s.mean) for m, s in result.summaries[flow].items()},
                             "cached": bool(fr.run.cached), "seconds": float(fr.run.seconds)}
                      for flow, fr in result.flows.items()},
            "files": {name: result.options.shown(path) for name, path in result.files.items()}}


def _print_summary(result) -> None:
    """The summary table, then where the report went (under --out as given: it may be a URI)."""
    from rich.table import Table

    from flows.bench.metrics import KINDS
    from flows.bench.report import column_label, headline_k, marks_legend, significance_mark

    k = headline_k(result.ks)
    table = Table(title=f"{result.dataset.name} ({result.dataset.split}), {len(result.dataset.qids)} queries, k={k}",
                  title_justify="left")
    table.add_column("flow")
    measures = [f"{kind}@{k}" for kind in KINDS] + [m for m in result.measures if "@" not in m]
    for m in measures:  # the files' name under the table's where they differ (RR@10 under MRR@10)
        table.add_column(column_label(m, between="\n"), justify="right")
    table.add_column("run")
    for flow, fr in result.flows.items():
        summaries = result.summaries[flow]
        table.add_row(flow, *(f"{summaries[m].mean:.4f}{significance_mark(result, flow, m)}" if m in summaries
                              else "–" for m in measures), "cached" if fr.run.cached else f"{fr.run.seconds:.1f} s")
    if legend := marks_legend(result):
        table.caption, table.caption_justify = legend, "left"
    shown = console(width=160)
    shown.print(table)
    files = {name: result.options.shown(result.files[name]) for name in ("report.md", "metrics.json")}
    shown.print(f"report: {files['report.md']}  metrics: {files['metrics.json']}")


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("bench", parents=[common], help="benchmark flows on a BEIR-layout dataset",
                                   description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    parser.set_defaults(handler=handle)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flows.bench``: ``tessera bench`` as a job entry point."""
    from flows.commands import standalone_main

    return standalone_main(handle, add_arguments, argv, prog="python -m flows.bench", description=DESCRIPTION,
                           epilog=EPILOG)
