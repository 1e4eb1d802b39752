"""``tessera run FLOW --queries FILE_OR_TEXT``: run a flow over queries and print the results.

``python -m flows.run`` is this command with the Ray executor by default, for cluster jobs
(docs/cluster.md: a job's paths are absolute, as its working directory is a temporary copy)::

    ray job submit --runtime-env cluster/runtime_env.yaml -- python -m flows.run demo \\
        --index "$PWD/.tessera/indices/sample" --queries data/sample/queries.jsonl --out "$PWD/results.parquet"

Ctrl-C cancels through the run's ``CancelToken`` (exit status 130); a second one aborts.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from flows import uris
from flows.commands._support import (EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError, add_cache_dir_argument,
                                     add_set_argument, console, escape, TableRows, load_flow, positive_int, print_json,
                                     refuse_cache_dir_without_cache, say_reading_the_terminal, step_cache)
from flows.commands.job_paths import check_job_paths
from operators.errors import short_repr
from operators.generate.answer_stream import ANSWER_OP


#: ``tessera run --help``'s examples (tests/flows/test_cli_parsing.py parses each); make demo's index.
EXAMPLES = ('tessera run hybrid --index .tessera/indices/sample -q "which insects make honey?"',
            "tessera run bm25 -i .tessera/indices/sample -q queries.jsonl --out run.trec",
            "tessera run rag -i .tessera/indices/sample -q questions.jsonl --json > answers.json")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("run", parents=[common], help="run a flow over queries", description=handle.__doc__,
                            epilog="Examples: " + "; ".join(EXAMPLES))
    add_arguments(parser, default_executor="local")
    parser.loose_values = "--queries"
    steps = "tessera flows show FLOW lists its steps"
    parser.missing_options = {
        **dict.fromkeys(("--model", "--llm"), f"a step's model is one of its params: --set STEP.model=NAME; {steps}"),
        **dict.fromkeys(("--k", "-k", "--top-k", "--topk"), "--top N shows N rows a query, and a step's k is one of "
                        f"its params: --set STEP.k=N; {steps}"),
        "--limit": "--top N shows N rows a query",
        **dict.fromkeys(("--output", "--format"), "--json prints one JSON document; --out FILE writes the rows to "
                        ".parquet, .jsonl or .csv, or a TREC run to .trec or .run, by its suffix")}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flows.run``: ``tessera run`` with the Ray executor by default."""
    from flows.commands import standalone_main

    return standalone_main(handle, lambda parser: add_arguments(parser, default_executor="ray"), argv,
                           prog="python -m flows.run", description=handle.__doc__)


def add_arguments(parser: argparse.ArgumentParser, *, default_executor: str) -> None:
    parser.add_argument("flow", metavar="FLOW", help="spec file (YAML/JSON), built-in or saved flow name")
    parser.add_argument("--queries", "-q", metavar="FILE_OR_TEXT", action="append",
                        help="queries file (.jsonl BEIR _id/text, .tsv qid<TAB>query, .txt, .parquet, .csv), "
                        "'-' for standard input (JSON lines if it starts with '{', a JSON array with '[', "
                        "qid<TAB>query lines if every line has a tab, else one query a line), "
                        "or one query text; repeat it for several query texts (-q 'first' -q 'second'); may be "
                        "left out when FLOW is a mosaicRAG request with a query, and must be when its steps start at a "
                        "source (sources.jsonl: it reads no queries)")
    parser.add_argument("--executor", choices=("local", "ray"), default=default_executor,
                        help=f"where steps run (default: {default_executor})")
    parser.add_argument("--index", "-i", metavar="NAME_OR_PATH",  # -i as in tessera ingest
                        help="index for the retrieval steps that leave params.index unset "
                        "(a path, or a name under $TESSERA_HOME/indices)")
    parser.add_argument("--out", "-o", metavar="FILE", help="write the result table (.parquet, .jsonl or .csv), "
                        "or its ranking as a TREC run file (.trec or .run: qid Q0 docno rank score tag)")
    add_set_argument(parser)
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the step cache")
    add_cache_dir_argument(parser)
    parser.add_argument("--top", type=positive_int, metavar="N",
                        help="rows shown per query: tables default 10, --json every row; with --out no tables "
                        "unless --top is given (--out always gets every row)")
    parser.add_argument("--json", action="store_true",
                        help="print the result (rows, roles, steps, timings, metadata) as one JSON document")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress or notes on stderr; with --out and without --json, nothing printed but "
                        "errors")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run a flow over queries and print the ranked results per query with their chips and timings."""
    from flows.queries import looks_like_path

    # Everything that can be wrong with the request is checked before anything runs.
    refuse_cache_dir_without_cache(args)
    given = args.queries or []
    texts = given if len(given) > 1 else None  # several query texts: no file among them (read_query_texts)
    query = given[0] if len(given) == 1 else None
    queries_path = query if query and looks_like_path(query) else None
    check_job_paths(outputs={"--out": args.out, "--cache-dir": args.cache_dir},
                    inputs={"--index": args.index, "--queries": queries_path}, executor=args.executor)
    with uris.local_input(queries_path, "queries") as queries_file, uris.local_output(args.out, "out") as out_file:
        return _run(args, queries_file or query, out_file, texts)


def _run(args: argparse.Namespace, queries_file: str | None, out_file: str | None,
         texts: list[str] | None = None) -> int:
    """``handle`` once remote inputs are local files and the output has a local path (``flows.uris``)."""
    from flows.commands._progress import ProgressReporter, cancel_on_interrupt
    from flows.executors import make_executor
    from flows.executors.base import as_queries, query_step
    from flows.model_check import check_models
    from flows.progress import CancelToken
    from flows.queries import read_queries, read_query_texts
    from flows.results_file import TREC_SUFFIXES, check_result_path, write_counted
    from flows.train import train_command
    from flows.trec_run import check_index_ids, check_trec_ids
    from operators.store.layout import check_index_exists

    index = args.index and uris.local_path(args.index, "index")
    flow, mosaic_query = load_flow(args.flow, index=index, given=args.index, settings=args.set)
    if index:  # the flow reads it (load_flow refused it otherwise): Index.open's error now, not the first search's
        check_index_exists(index)
    if (queries_file is not None or texts) and query_step(flow) is None:  # as an unused --index is refused
        raise CliError(f"--queries would not be used: flow '{flow.name}' reads no queries (its steps start at a "
                       "source); drop --queries", field="queries")
    if mosaic_query is not None and (texts or queries_file is not None):
        # the request's query was dropped without a word: a user who reuses a request's steps for other queries
        # means it, one who added --queries out of habit learns which queries ran (a note: --quiet hides it)
        more = f" (and {len(args.queries) - 1} more)" if len(args.queries) > 1 else ""
        logging.getLogger("flows.commands.run").warning(
            "--queries %s%s replaces the request's own query %s (%s): the request's steps run for the queries given",
            short_repr(args.queries[0], 80), more, short_repr(mosaic_query, 80), args.flow, extra={"note": True})
    if texts:
        queries = read_query_texts(texts)
    elif queries_file is not None:
        if queries_file == "-":  # at a terminal it waited without a word
            say_reading_the_terminal("the queries, one a line,", quiet=args.quiet)
        queries = read_queries(queries_file)
    elif mosaic_query is not None:
        queries = read_queries(mosaic_query)
    elif query_step(flow) is None:  # its steps all start at a source (sources.jsonl): nothing to ask
        queries = as_queries(None, flow)
    else:
        raise CliError("give the queries: --queries FILE_OR_TEXT", field="queries")
    out_path = _checked_out(out_file, check_result_path) if out_file else None
    if out_path is not None and queries_file not in (None, "-") and _same_file(queries_file, out_path):
        raise CliError(f"--out {args.out} is the --queries file: the results would replace the queries; write them "
                       "to another file", field="out")
    if out_path is not None and queries_file not in (None, "-") and _same_file(queries_file,
                                                                                Path(answers_path(str(out_path)))):
        raise CliError(f"--out {args.out} would put the queries' answers in {answers_path(args.out)}, the --queries "
                       "file; name --out otherwise", field="out")
    if out_path is not None and out_path.suffix.lower() in TREC_SUFFIXES:  # refused now, not after the whole run
        keeps = "; --out to .parquet, .jsonl or .csv keeps it"
        check_trec_ids(queries.column("qid").to_pylist(), "qid", keeps)
        check_index_ids(flow.spec.named_indices().values(), keeps)
    for step_id, cls in flow.spec.unset_index_steps().items():
        raise CliError(f"operator {cls.name} needs an index: pass --index NAME_OR_PATH "
                       f"(built by tessera ingest) or set steps.{step_id}.params.index in the spec",
                       step=step_id, field="params.index")
    check_models([flow], how_to_make=train_command)
    cache = step_cache(args)
    if cache is not None:
        cache.check()  # a file given as --cache-dir, a damaged database, a bad $TESSERA_HOME: before anything runs
    executor = make_executor(args.executor, cache=cache, keep_history=False)
    token = CancelToken()
    reporter = ProgressReporter(enabled=not args.quiet, flow=flow.name)
    with cancel_on_interrupt(token), reporter:
        result = executor.run(flow, queries, progress=reporter, cancel=token)
    answers = 0
    if out_path is not None:
        _, written = write_counted(result.table, out_path, tag=flow.name)  # Ctrl-C, SIGTERM: no temporary file left
        answers = _write_answers(result, queries, args.out)
        if not args.quiet:
            whose = "query's" if answers == 1 else "queries'"  # it said "1 query' answers"
            print(f"wrote {_written(written, result.table, out_path)} to "
                  f"{args.out if uris.is_uri(args.out) else out_path}"
                  + (f" and {answers} {whose} answers and metadata to "
                     f"{answers_path(args.out)}" if answers else ""), file=sys.stderr)
    _print(args, result, queries, out_path, answers)
    if (empty := _sources_read_nothing(flow, result)) is not None:  # a queries file with none is refused before
        print(f"tessera: error: {empty}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    if (failed := _no_answer_written(flow, result, queries)) is not None:  # printed and written all the same
        print(f"tessera: error: {failed}", file=sys.stderr, flush=True)
        return EXIT_INTERNAL
    return EXIT_OK


def _sources_read_nothing(flow, result) -> str | None:
    """Why a flow whose steps start at sources ran on nothing: every source step read no document (an empty JSONL or
    CSV file, blank lines or a header row alone); it printed "0 rows" and exited 0, as if done. None when one did
    (an empty file among others is a warning of the source's: ``warn_no_records``)."""
    sources = [step for step in flow.needed_steps() if flow.operators[step].scope == "source"]
    if not sources or any(result.steps[step].rows_out for step in sources if step in result.steps):
        return None
    step = sources[0]
    op = flow.operators[step]
    path = getattr(op.params, "path", None)
    return (f"step '{step}' ({op.name}) read no documents" + (f" from {path}" if path else "")
            + ": no records there (an empty file, blank lines or a header row alone), or every one was skipped as "
            "bad; the flow ran on nothing")


def _no_answer_written(flow, result, queries) -> str | None:
    """Why a run of a flow that answers wrote no answer for any query (each one's answer step degraded: the model
    unreachable, every reply junk), as ``tessera ingest`` fails when every document did: it exited 0 with a warning,
    and a script read the run as done. None when one query was answered (or declined: the no-answer text), or the
    flow answers nothing."""
    if not any(op.name == ANSWER_OP for op in flow.operators.values()) or "qid" not in queries.column_names:
        return None
    held = [result.metadata.get(qid) or {} for qid in dict.fromkeys(queries.column("qid").to_pylist())]
    if not held or any(isinstance(meta.get("answer"), str) for meta in held):
        return None
    first = next((meta["degraded"] for meta in held if meta.get("degraded")), None)
    reason = first.get("reason") if isinstance(first, dict) else first
    return (f"no answer was written: the answer step failed for all {len(held)} queries"
            + (f" (the first: {reason})" if reason else "") + "; the results hold what the other steps found")


#: What a user who named these as --out meant: one JSON document (``--out r.json``), or stdout (``--out -``).
_STDOUT_HINTS = {".json": "; for one JSON document, --json prints it on stdout (--json > FILE.json), and .jsonl "
                 "writes a row a line",
                 "-": "; stdout gets the tables, or with --json one JSON document (--json > FILE.json)"}


def _checked_out(out_file: str, check_result_path) -> Path:
    """``--out``, checked before the run; refused as ``.json`` or ``-``, it says what gives that on stdout."""
    from operators.errors import SpecError

    try:
        return check_result_path(out_file)
    except SpecError as err:
        hint = _STDOUT_HINTS.get("-" if out_file == "-" else Path(out_file).suffix.lower())
        if hint is None:
            raise
        raise CliError(f"{err.message}{hint}", field="out") from None


def answers_path(out: str) -> str:
    """Where ``--out``'s per-query metadata (a RAG flow's answer, sources and usage) goes: ``NAME.queries.jsonl``
    beside ``NAME.SUFFIX``, a URI's too."""
    return f"{out.rpartition('.')[0]}.queries.jsonl"


def _written(lines: int, table, out_path: Path) -> str:
    """What ``--out`` holds: its rows, or a TREC run's ``lines`` (a document's passages are one line, at its best
    passage's rank: "wrote 3176 rows" was said of a file of 1939 lines)."""
    from flows.results_file import TREC_SUFFIXES

    if out_path.suffix.lower() not in TREC_SUFFIXES:
        return f"{lines} rows"
    return f"{lines} lines" + (f" (the documents of {table.num_rows} passage rows)" if lines != table.num_rows else "")


def _write_answers(result, queries, out: str) -> int:
    """The queries' metadata as JSON lines (``qid``, ``query``, then the metadata, in the queries' order), beside the
    rows: the rows hold documents, and an answer is no row. A line for every query once any has metadata: one that
    found nothing has none (no answer step ran for it), and its line says so by having none. Returns the lines
    written (0: no file)."""
    import json

    from operators.atomic import replacing

    if not result.metadata:
        return 0
    texts = dict(zip(queries.column("qid").to_pylist(), queries.column("query").to_pylist()))
    order = list(texts) + [q for q in result.metadata if q not in texts]
    lines = [json.dumps({"qid": q, "query": texts.get(q), **result.metadata.get(q, {})}, default=str,
                        ensure_ascii=False) for q in order]
    try:
        with uris.local_output(answers_path(out), "out") as local, replacing(Path(local)) as tmp:
            Path(tmp).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as err:  # a full disk: said as --out's rows are (flows.results_file), not an internal error
        from operators.disk_refusal import refusal, where

        if (said := refusal(err)) is None:
            raise
        raise CliError(f"cannot write the answers beside --out: {answers_path(out)}: {said} "
                       f"({where(Path(answers_path(out)).parent)}); the rows are in {out}, the answers were not "
                       "written: free space, or give --out on another disk, and run again", field="out") from None
    return len(lines)


def _same_file(queries: str, out: Path) -> bool:
    """Whether ``--out`` names the queries file (also through a link or another spelling of the path)."""
    try:
        return out.exists() and Path(queries).exists() and os.path.samefile(queries, out)
    except OSError:  # a literal query is no file name
        return False


def _print(args: argparse.Namespace, result, queries, out_path, answers: int = 0) -> None:
    """What stdout gets. With --json one document: every row, or at most --top per query when given (with --out, also
    where the rows went). Else the tables (--top rows each, default 10), the steps and the summary line; with --out
    the rows are in the file, so the tables only when --top is given, and with --quiet nothing."""
    from flows.commands._results import print_results, print_steps, top_rows

    if args.json:
        data = result.to_dict(rows=False)
        # as the summary line says it: the queries asked, those with no results among them ("0 rows, 1 step" said
        # nothing of the query that found nothing), and their qids for a script
        data["description"] = result.description(queries.num_rows)
        found = set(result.table.column("qid").to_pylist()) if "qid" in result.table.column_names else set()
        data["no_results"] = [qid for qid in queries.column("qid").to_pylist() if qid not in found]
        data["rows"] = TableRows(result.table if args.top is None else top_rows(result.table, args.top))
        if out_path is not None:
            data["out"] = {"path": args.out if uris.is_uri(args.out) else str(out_path),
                           "rows": result.table.num_rows}
            if answers:
                data["out"]["answers"] = {"path": answers_path(data["out"]["path"]), "queries": answers}
        print_json(data)
        return
    if out_path is not None and args.quiet:
        return
    out = console()
    if out_path is None or args.top is not None:
        print_results(out, result, queries, args.top or 10)
    print_steps(out, result)
    out.print(f"[bold]{escape(result.flow)}[/]: {escape(result.description(queries.num_rows))}")
