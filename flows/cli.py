"""The ``tessera`` command.

::

    tessera ops [NAME...] [--json | --format table|json|mosaic]
    tessera run FLOW --queries FILE_OR_TEXT [--executor local|ray] [--out FILE] [--no-cache]
                [--cache-dir DIR] [--top N] [--json] [--quiet]
    tessera flows list | show NAME | save NAME FILE | delete NAME
    tessera cache explain FLOW [STEP] [--cache-dir DIR] [--json]
    tessera cache clear [--cache-dir DIR]

FLOW is a spec file (YAML/JSON, native or mosaicRAG dialect), a built-in flow
(``flows/specs/NAME.yaml``) or a saved flow (``$TESSERA_HOME/flows/NAME.yaml``).

Exit status: 0 done; 2 a bad spec, parameter, operator, file or argument (one line on
stderr naming the step and field); 1 an unexpected internal error; 130 cancelled
with Ctrl-C (the first Ctrl-C cancels through the run's ``CancelToken``, which the
executor checks between batches; a second one aborts at once). ``--debug`` (or
``TESSERA_DEBUG=1``) prints the traceback of an error.

``python -m flows.run`` is ``tessera run`` with the Ray executor by default (see
``flows/run.py``), for ``ray job submit -- python -m flows.run ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from flows.commands._support import (  # noqa: F401 - re-exported for callers of flows.cli
    EXIT_CANCELLED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    escape,
)
from flows.commands._support import console as _console
from flows.commands._support import load_flow as _load_flow
from flows.commands._support import positive_int as _positive_int
from flows.commands._support import print_json as _print_json
from operators.errors import FlowCancelled, TesseraError


# -- entry points ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``tessera ...``; returns the exit status (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_handler(args.handler, args)


def run_main(argv: Sequence[str] | None = None, *, prog: str = "python -m flows.run",
             default_executor: str = "ray") -> int:
    """``tessera run`` as its own command (``python -m flows.run``), with its own default executor."""
    return standalone_main(_cmd_run, lambda parser: add_run_arguments(parser, default_executor=default_executor),
                           argv, prog=prog, description=_cmd_run.__doc__)


def standalone_main(handler: Callable[[argparse.Namespace], int],
                    add_arguments: Callable[[argparse.ArgumentParser], None], argv: Sequence[str] | None, *,
                    prog: str, description: str | None, epilog: str | None = None) -> int:
    """One subcommand as a command of its own (``python -m flows.run``, ``flows.ingest``, ``flows.bench``,
    ``flows.train``: what ``ray job submit`` runs): its arguments plus ``--debug``, errors reported as
    ``tessera``'s are."""
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)
    add_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    return run_handler(handler, parser.parse_args(list(sys.argv[1:] if argv is None else argv)))


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; turn errors into one line on stderr and an exit status."""
    debug = getattr(args, "debug", False) or os.environ.get("TESSERA_DEBUG", "") not in ("", "0")
    try:
        return handler(args)
    except FlowCancelled as err:
        _error(f"cancelled: {err}")
        return EXIT_CANCELLED
    except TesseraError as err:
        if debug:
            import traceback

            traceback.print_exc()
        _error(f"error: {err}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_CANCELLED
    except BrokenPipeError:  # `tessera ops | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except Exception as err:  # noqa: BLE001 - the last line of defence: no traceback for people
        if debug:
            import traceback

            traceback.print_exc()
        hint = "" if debug else " (run with --debug for the traceback)"
        _error(f"internal error: {type(err).__name__}: {err}{hint}")
        return EXIT_INTERNAL


def _error(message: str) -> None:
    print(f"tessera: {_one_line(message)}", file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", str(text)).strip()


# -- the parser ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="print the traceback of an error")

    parser = argparse.ArgumentParser(
        prog="tessera",
        description="Tessera: retrieval and RAG pipelines as DAGs of operators.",
        epilog="Run 'tessera COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    ops = sub.add_parser("ops", parents=[common], help="describe the registered operators",
                         description="Pipeline info for every registered operator, generated from the registry.")
    ops.add_argument("names", nargs="*", metavar="NAME", help="only these operators (ids or aliases)")
    ops.add_argument("--format", choices=("table", "json", "mosaic"), default="table",
                     help="table (default), json (Tessera's info) or mosaic (mosaicRAG's /pipeline/info)")
    ops.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    ops.set_defaults(handler=_cmd_ops)

    run = sub.add_parser("run", parents=[common], help="run a flow over queries",
                         description=_cmd_run.__doc__)
    add_run_arguments(run, default_executor="local")

    from flows.commands import register_all

    register_all(sub, common)  # ingest, bench, index, ...: one module each in flows/commands/
    return parser


def add_run_arguments(parser: argparse.ArgumentParser, *, default_executor: str) -> None:
    parser.add_argument("flow", metavar="FLOW", help="spec file (YAML/JSON), built-in or saved flow name")
    parser.add_argument("--queries", "-q", metavar="FILE_OR_TEXT",
                        help="queries file (.jsonl BEIR _id/text, .tsv qid<TAB>query, .txt, .parquet, .csv) "
                        "or one query text; may be left out when FLOW is a mosaicRAG request with a query")
    parser.add_argument("--executor", choices=("local", "ray"), default=default_executor,
                        help=f"where steps run (default: {default_executor})")
    parser.add_argument("--index", metavar="NAME_OR_PATH",
                        help="index for the retrieval steps that leave params.index unset "
                        "(a path, or a name under $TESSERA_HOME/indices)")
    parser.add_argument("--out", "-o", metavar="FILE", help="write the result table (.parquet, .jsonl or .csv)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the step cache")
    parser.add_argument("--cache-dir", metavar="DIR", help="cache directory (default $TESSERA_HOME/cache)")
    parser.add_argument("--top", type=_positive_int, default=10, metavar="N",
                        help="rows shown per query (default 10; --out gets every row)")
    parser.add_argument("--json", action="store_true",
                        help="print the result (rows, roles, steps, timings, metadata) as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(handler=_cmd_run)


# -- tessera ops ------------------------------------------------------------------------


def _cmd_ops(args: argparse.Namespace) -> int:
    from flows import info
    from operators.registry import all_operators, get_operator

    classes = [get_operator(n) for n in args.names] if args.names else list(all_operators().values())
    if args.format == "mosaic":
        _print_json({cls.name: info.mosaic_step_info(cls) for cls in classes})
        return EXIT_OK
    infos = {cls.name: info.operator_info(cls) for cls in classes}
    if args.format == "json":
        _print_json(infos)
        return EXIT_OK
    from rich.table import Table

    console = _console()
    if args.names:  # one table of parameters per operator
        for item in infos.values():
            _print_operator(console, item)
        return EXIT_OK
    table = Table(title=f"{len(infos)} operators", show_lines=False, expand=False)
    table.add_column("operator", style="bold cyan", no_wrap=True)
    table.add_column("scope")
    table.add_column("description")
    table.add_column("parameters (default)")
    for item in infos.values():
        params = ", ".join(_param_summary(name, p) for name, p in item["parameters"].items())
        table.add_row(item["id"], item["scope"], escape(item["description"]), escape(params) or "-")
    console.print(table)
    skipped = info.skipped()
    for module, reason in skipped.items():
        console.print(f"[yellow]skipped[/] {module}: {escape(reason)}")
    console.print("Details: tessera ops NAME; JSON: tessera ops --json; mosaicRAG: tessera ops --format mosaic")
    return EXIT_OK


def _param_summary(name: str, p: dict[str, Any]) -> str:
    if p["required"]:
        return f"{name} (required)"
    return f"{name}={json.dumps(p['default'])}"


def _print_operator(console, item: dict[str, Any]) -> None:
    from rich.table import Table

    aliases = f"  aliases: {', '.join(item['aliases'])}" if item["aliases"] else ""
    console.print(f"[bold cyan]{item['id']}[/] — {item['name']} ({item['category']}, scope {item['scope']}, "
                  f"version {item['version']}){aliases}")
    console.print(escape(item["description"]))
    table = Table(show_lines=False)
    for col in ("parameter", "type", "default", "allowed / bounds", "description"):
        table.add_column(col)
    for name, p in item["parameters"].items():
        kind = p["type"] + (f"[{p['items']}]" if p.get("items") else "") + (" | null" if p["nullable"] else "")
        limits = ", ".join(map(str, p["allowed"])) if p["allowed"] else ", ".join(
            f"{k} {v}" for k, v in p["bounds"].items())
        default = "(required)" if p["required"] else json.dumps(p["default"])
        table.add_row(name, escape(kind), escape(default), escape(limits), escape(p["description"]))
    console.print(table)


# -- tessera run ------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    """Run a flow over queries and print the ranked results per query with their chips and timings."""
    import pyarrow as pa

    from flows.queries import check_result_path, read_queries, write_results

    # Everything that can be wrong with the request is checked before anything runs.
    flow, mosaic_query = _load_flow(args.flow, index=getattr(args, "index", None))
    if args.queries is not None:
        queries = read_queries(args.queries)
    elif mosaic_query is not None:
        queries = read_queries(mosaic_query)
    else:
        raise CliError("give the queries: --queries FILE_OR_TEXT", field="queries")
    out_path = check_result_path(args.out) if args.out else None
    for step_id, cls in flow.spec.unset_index_steps().items():
        raise CliError(f"operator {cls.name} needs an index: pass --index NAME_OR_PATH "
                       f"(built by tessera ingest) or set steps.{step_id}.params.index in the spec",
                       step=step_id, field="params.index")
    executor = _make_executor(args.executor, _make_cache(args))

    from flows.progress import CancelToken

    token = CancelToken()
    reporter = _ProgressReporter(enabled=not args.quiet, flow=flow.name)
    with _cancel_on_interrupt(token), reporter:
        result = executor.run(flow, queries, progress=reporter, cancel=token)
    table = result.table
    if out_path is not None:
        write_results(table, out_path)
        print(f"wrote {table.num_rows} rows to {out_path}", file=sys.stderr)
    if args.json:
        _print_json(result.to_dict(rows=True))
        return EXIT_OK
    console = _console()
    _print_results(console, table if isinstance(table, pa.Table) else pa.table({}), queries, result.roles,
                   result.metadata, args.top)
    _print_steps(console, result)
    console.print(f"[bold]{escape(result.flow)}[/]: {escape(result.description())}")
    return EXIT_OK


def _make_cache(args: argparse.Namespace):
    if args.no_cache:
        return None
    from flows.cache import StepCache
    from flows.store import default_cache_dir

    return StepCache(Path(args.cache_dir) if args.cache_dir else default_cache_dir())


def _make_executor(kind: str, cache):
    if kind == "local":
        from flows.executors.local import LocalExecutor

        return LocalExecutor(cache=cache, keep_history=False)
    try:
        from flows.executors.ray_data import RayDataExecutor
    except ImportError as err:
        raise CliError(f"the Ray executor is not available: {err}", field="executor") from None
    import inspect

    accepted = inspect.signature(RayDataExecutor).parameters
    kwargs = {"cache": cache}
    if "keep_history" in accepted:
        kwargs["keep_history"] = False
    return RayDataExecutor(**kwargs)


class _cancel_on_interrupt:
    """First Ctrl-C cancels the run through its token; a second one aborts (KeyboardInterrupt)."""

    def __init__(self, token) -> None:
        self.token = token
        self.previous = None

    def _handler(self, signum, frame) -> None:
        if self.token.cancelled:
            raise KeyboardInterrupt
        self.token.cancel("interrupted (Ctrl-C)")
        print("\ntessera: cancelling at the next batch (Ctrl-C again to abort)", file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


class _ProgressReporter:
    """The executor's progress callback: a rich progress bar on a terminal, one line per step otherwise."""

    def __init__(self, *, enabled: bool, flow: str) -> None:
        self.enabled = enabled
        self.flow = flow
        self.live = enabled and sys.stderr.isatty()
        self.progress = None
        self.task = None
        self.done = 0
        self._lock = threading.Lock()

    def __enter__(self):
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("steps  {task.fields[rows]} rows"), TimeElapsedColumn(),
                console=_console(stderr=True), transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.flow, total=None, rows=0)
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self.progress is not None:
                where = f"{self.flow}: {event.step} ({event.op})" if event.step else self.flow
                self.progress.update(self.task, description=where, completed=event.steps_done,
                                     total=event.steps_total, rows=event.rows_done)
            elif event.steps_done > self.done and event.step:
                self.done = event.steps_done
                print(f"[{event.steps_done}/{event.steps_total}] {event.step} ({event.op}) done, "
                      f"{event.step_rows_done} rows", file=sys.stderr, flush=True)


def _print_results(console, table, queries, roles: dict[str, str], metadata: dict, top: int) -> None:
    import numpy as np
    import pyarrow as pa
    from rich.table import Table

    from operators.tables import qid_groups

    chips = [c for c, role in roles.items() if role == "chip" and c in table.column_names]
    base = [c for c in ("rank", "docno", "title", "score") if c in table.column_names]
    if "docno" not in base and "query" in table.column_names:
        base.append("query")
    columns = base + [c for c in chips if c not in base] or table.column_names[:6]
    groups = dict(qid_groups(table)) if "qid" in table.column_names and table.num_rows else {}
    ordered = [(q, t) for q, t in zip(queries.column("qid").to_pylist(), queries.column("query").to_pylist())]
    if not groups and table.num_rows:  # not a per-query result: one table
        ordered, groups = [(None, None)], {None: table}
    for qid, text in ordered:
        rows = groups.get(qid)
        title = escape(f"{qid}: {text}" if qid is not None else f"{table.num_rows} rows")
        if rows is None or rows.num_rows == 0:
            console.print(f"[bold]{title}[/]  no results")
        else:
            if "rank" in rows.column_names:
                ranks = rows.column("rank").to_numpy(zero_copy_only=False).astype(float)
                rows = rows.take(pa.array(np.argsort(np.where(np.isnan(ranks), np.inf, ranks), kind="stable")))
            shown = rows.slice(0, top)
            out = Table(title=title, title_justify="left", title_style="bold")
            for col in columns:
                numeric = pa.types.is_integer(rows.schema.field(col).type) or pa.types.is_floating(
                    rows.schema.field(col).type)
                out.add_column(escape(col), justify="right" if numeric else "left",
                               style="cyan" if col in chips else None, overflow="fold")
            for row in shown.select(columns).to_pylist():
                out.add_row(*[_cell(row[c]) for c in columns])
            if rows.num_rows > top:
                out.caption = f"{rows.num_rows - top} more rows (--top N to show more)"
            console.print(out)
        for key, value in (metadata.get(str(qid), {}) if qid is not None else {}).items():
            console.print(f"  [bold]{escape(str(key))}[/]: {_cell(value, limit=2000)}")


def _cell(value: Any, limit: int = 80) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value, default=str, ensure_ascii=False)
    text = str(value)
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def _print_steps(console, result) -> None:
    from rich.table import Table

    table = Table(title="steps", title_justify="left", title_style="bold")
    for col, justify in (("step", "left"), ("operator", "left"), ("rows in", "right"), ("rows out", "right"),
                         ("cache hits", "right"), ("seconds", "right")):
        table.add_column(col, justify=justify)
    for step, rec in result.steps.items():
        cache = f"{rec.hits}/{rec.units}" if rec.cached else "off"
        table.add_row(escape(step), rec.op, str(rec.rows_in), str(rec.rows_out), cache, f"{rec.seconds:.3f}")
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
