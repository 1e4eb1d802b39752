"""What every ``tessera`` subcommand shares: exit codes, the CLI error, console output, loading a flow."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from typing import Any, Iterator

from operators.env_numbers import env_columns
from operators.errors import TesseraError


#: Control characters but tab and newline (C0, DEL, C1): printed as they are, a query's ESC sequence recoloured or
#: rewrote the terminal and a NUL reached it raw.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """Escape rich markup in data (titles, descriptions, values) before printing it, and show its control characters
    as ``\\x1b`` instead of sending them to the terminal."""
    from rich.markup import escape as rich_escape

    return rich_escape(_CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text))


def escape_id(text: str) -> str:
    """``escape`` for an id in a table's cell: one holding a character that does not print (a newline, a tab, a
    no-break space: a source's id field may hold any) is shown as its ``repr``, quotes and all (``'a\\nb'``), so its
    row stays one row and shows what the id holds; JSON output keeps the id itself."""
    return escape(text if text.isprintable() else repr(text))


EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class CliError(TesseraError):
    """A bad command-line argument or file."""


def require_extra(extra: str, modules: tuple[str, ...]) -> None:
    """Fail with the install line when a command's optional dependencies are missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"this command needs the '{extra}' extra (missing: {', '.join(missing)}): "
                       f"pip install 'tessera[{extra}]' (from a clone: pip install -e '.[{extra}]')", field=extra)


def refuse_contradicting_index_options(args: Any, dense_only: tuple[str, ...]) -> None:
    """``--no-dense`` with ``--no-bm25`` (nothing left to search by), or with an option that only the vectors use
    (``dense_only``: ``--dense-type``, ``--encoder``), which it would ignore: one error naming both options."""
    if args.no_dense and args.no_bm25:
        raise CliError("--no-dense and --no-bm25 together leave the new index nothing to search by: drop one",
                       field="--no-bm25")
    given = [option for option in dense_only if getattr(args, option[2:].replace("-", "_")) is not None]
    if args.no_dense and given:
        raise CliError(f"--no-dense and {given[0]} together: {given[0]} is for the vectors that --no-dense leaves "
                       "out: drop one", field=given[0])


def cli_option_error(err: TesseraError, options: dict[str, str]) -> TesseraError:
    """A Python call's error in the command line's words. The engine names a parameter as a Python caller passes
    it: ``name=VALUE`` or ``name=`` (``cannot read source='x'``), or as the error's field, bare (``shard_size must
    be at least 1``). Each name of ``options`` (``{"shard_size": "--shard-size"}``) becomes the option, in the
    message (``cli_option_text``) and in the field; the bare field only where the message has no ``field=`` (so a
    path that holds the name, in such a message, stays as it is)."""
    import re

    if not options:
        return err
    bare = err.field in options and not re.search(rf"(?<![\w./~-]){re.escape(err.field)}=", err.message)
    message = cli_option_text(err.message, options, bare=err.field if bare else None)
    if message == err.message and err.field not in options:
        return err
    return CliError(message, step=err.step, op=err.op, field=options.get(err.field or "", err.field))


#: The engine's fields that a command's positional argument feeds (``Flow.load``'s ``spec``, an operator's ``op``):
#: its first, or the one it names by this default (``flows save NAME FILE``: ``set_defaults(spec_argument="file")``).
ARGUMENT_FIELDS, SPEC_ARGUMENT = ("spec", "op"), "spec_argument"


def typed_options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option of ``parser`` by the names code gives it as an error's field (``cache_dir``, ``cache-dir``), to
    the option the user types (``--cache-dir``): ``named_as_typed`` uses them. A positional argument, and the
    engine's fields it feeds, map to its name in ``--help`` (``tessera run hybrd`` said ``field 'spec'``: ``FLOW``)."""
    names: dict[str, str] = {}
    for action in parser._actions:
        typed = [option for option in action.option_strings if option.startswith("--")]
        if typed and action.dest not in (argparse.SUPPRESS, "help"):
            names[action.dest] = names[action.dest.replace("_", "-")] = typed[0]
            names.setdefault(typed[0][2:].replace("-", "_"), typed[0])  # --flow's dest is flows: an error says flow
    shown = {action.dest: action.metavar or action.dest.upper() for action in parser._actions
             if not action.option_strings and not isinstance(action, argparse._SubParsersAction)}
    fed = shown.get(parser.get_default(SPEC_ARGUMENT)) or next(iter(shown.values()), None)  # ARGUMENT_FIELDS'
    for dest, name in [*shown.items(), *((field, fed) for field in ARGUMENT_FIELDS if fed)]:
        names.setdefault(dest, name)
    return names


def named_as_typed(err: TesseraError, options: dict[str, str]) -> TesseraError:
    """``err`` with its field named as the command line's option (``field '--cache-dir'``, not the engine's
    ``field 'cache_dir'``). An engine error about a step keeps its field: that is the step's param, not an option;
    so does one about a spec's own fields (``load_flow``: a top-level ``index:`` in the file is not ``--index``)."""
    in_spec = getattr(err, "in_spec", False) and err.field not in ARGUMENT_FIELDS  # a spec file's `name:` is no NAME
    if err.field in options and not in_spec and (err.step is None or isinstance(err, CliError)):
        err.field = options[err.field]
    return err


def cli_option_text(text: str, options: dict[str, str], *, bare: str | None = None) -> str:
    """``text``, written in a Python call's words, in the command line's: each ``name=`` of ``options`` becomes
    its option (``shard_size=N``: ``--shard-size N``; ``spec=``: ``--spec``; a flag's ``retry_failed=True``:
    ``--retry-failed``), and so does the name ``bare`` where it stands alone. A name inside a word or a path
    (``sources.jsonl``, ``/data/source/``) is not one."""
    import re

    names = "|".join(re.escape(name) for name in sorted(options, key=len, reverse=True))

    def named(match: re.Match) -> str:
        name, equals, after = match.group(1), match.group(2), match.group(3)
        if equals == "=True":  # a flag, set
            return options[name]
        if equals:  # a value follows, or not (``spec=,``, ``source=`` at the end)
            return options[name] + (" " if after and not after.isspace() and after not in ",;)" else "")
        return options[name] if name == bare else name

    return re.sub(rf"(?<![\w./~-])({names})(?![\w/~-]|\.\w)(=True(?!\w)|=?)(?=(.?))", named, text)


@contextlib.contextmanager
def rewritten_logs(name: str, rewrite) -> Iterator[None]:
    """While it is open, each record the logger ``name`` logs goes through ``rewrite(record)`` first."""
    import logging

    def rewriting(record: logging.LogRecord) -> bool:
        rewrite(record)
        return True

    logger = logging.getLogger(name)
    logger.addFilter(rewriting)
    try:
        yield
    finally:
        logger.removeFilter(rewriting)


def cli_option_logs(name: str, options: dict[str, str]):
    """While it is open, what the logger ``name`` logs is in the command line's words (``cli_option_text``): a
    warning the engine words for a Python caller (``ingest again with retry_failed=True``) says ``--retry-failed``
    to this command's user. Only the message's own text is rewritten, not the values logged in it (paths, a
    record's error)."""

    def in_options(record) -> None:
        if isinstance(record.msg, str):
            record.msg = cli_option_text(record.msg, options)

    return rewritten_logs(name, in_options)


def whole_number(text: str) -> int:
    """An option's whole number, any sign (``--seed``), refused in Tessera's words as ``positive_int`` is, not
    argparse's ``invalid int value: 'x'``."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None


def positive_int(text: str) -> int:
    value = whole_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def count(text: str) -> int:
    """An option's whole number where 0 means something (``--offset 0``: skip none), said as ``positive_int`` is."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def number(text: str) -> float:
    """An option's number (``--older-than 0.5``), refused in Tessera's words (``'x' is not a number``), not argparse's
    ``invalid float value: 'x'``; what range it must be in is the command's to say."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None


def show_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def console(stderr: bool = False, width: int | None = None):
    """A rich console on stdout (or stderr); its width is the terminal's, else ``width``, else ``$COLUMNS`` or 120
    (``env_columns``: a bad one ignored). A reader that stops reading (``tessera ops | head``) ends the command
    with status 0, as ``run_handler`` does."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:  # rich's own exits with status 1
            self.quiet = True
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.file.fileno())
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else (width or env_columns())
    return PipeConsole(file=stream, width=width, highlight=False, soft_wrap=False, emoji=False)


def say_reading_the_terminal(what: str, *, quiet: bool = False) -> None:
    """At a terminal, a command given ``-`` waited for its input without a word, as if it hung: it says what it reads
    there and how that ends (``what``: "the queries, one a line"). Piped input says nothing."""
    if not quiet and sys.stdin is not None and sys.stdin.isatty():
        print(f"tessera: reading {what} from the terminal; Ctrl-D ends it, Ctrl-C cancels", file=sys.stderr,
              flush=True)


def print_json(data: Any) -> None:
    """``data`` as one JSON document on stdout, written as it is encoded (``TableRows`` are made as they go)."""
    chunks: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=2, default=str, ensure_ascii=False).iterencode(data):
        chunks.append(chunk)
        size += len(chunk)
        if size >= 1 << 20:  # written by the megabyte: a write per piece of JSON is slow
            sys.stdout.write("".join(chunks))
            chunks.clear()
            size = 0
    sys.stdout.write("".join(chunks) + "\n")
    sys.stdout.flush()


class TableRows(list):
    """A table's rows as a JSON array for ``print_json``, made a batch at a time as the encoder reaches them:
    ``tessera run --json`` over 3,000 queries held every row as Python objects and the whole document as one
    string (3.4 GB for 456 MB of JSON). Only for ``print_json``: its indenting encoder iterates the list, where
    ``json.dumps`` without ``indent`` (the C encoder) would read the list's own, empty, storage."""

    def __init__(self, table) -> None:
        super().__init__()
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    def __iter__(self):
        for batch in self.table.to_batches(max_chunksize=256):
            yield from _finite_or_null(batch).to_pylist()


def _finite_or_null(batch):
    """``batch`` with NaN and infinities in its float columns as nulls: JSON has no NaN, and the encoder would write
    the ``NaN`` that strict parsers (``JSON.parse``, ``jq``) refuse (a model's score can be NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, column in enumerate(batch.columns):
        if pa.types.is_floating(column.type) and pc.any(pc.invert(pc.is_finite(column))).as_py():
            batch = batch.set_column(i, batch.schema.field(i), pc.if_else(pc.is_finite(column), column, None))
    return batch


def report(args: Any, data: dict[str, Any], text: str) -> None:
    """A command's outcome: ``data`` as one JSON document on stdout with ``--json``, else the line ``text``."""
    if getattr(args, "json", False):
        print_json(data)
    else:
        print(text, flush=True)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set STEP.PARAM=VALUE``, repeatable: a step's param for this run (``flows.param_settings``)."""
    parser.add_argument("--set", metavar="STEP.PARAM=VALUE", action="append",
                        help="set a step's param for this run, its value read as YAML (--set dense.k=50 "
                        "--set answer.model=gemma2); repeat it for several")


def load_flow(source: str, *, index: str | None = None, given: str | None = None, settings: list[str] | None = None):
    """Build a flow from a path/name/text; a mosaicRAG request also yields its query.

    ``settings``: ``--set``'s ``STEP.PARAM=VALUE`` texts. ``index`` fills the ``index`` param of every retrieval step
    that leaves it unset. ``given``, the ``--index``
    the user typed: when no step leaves it unset that option would be ignored, so it is an error naming why
    (a flow that names its own index, or reads none)."""
    from flows.spec import load_request
    from flows.spec_checks import unused_index
    from operators.errors import SpecError

    try:
        spec, query = load_request(source)
    except SpecError as err:  # its field is the spec's ('index' at its top level), not the option of that name
        err.in_spec = True
        raise
    if settings:  # before --index: a setting may name a step's own index
        from flows.param_settings import with_settings

        spec = with_settings(spec, settings, field="set")
    if index is not None and spec.unset_index_steps():
        spec = spec.with_index(index)
    elif given is not None:
        spec.build()  # a spec that does not build says why first (a param out of range), then the unused --index
        unused = unused_index(spec, f"--index {given}", "drop --index")
        raise CliError(unused.message, step=unused.step, field="index")
    flow = spec.build()
    warn_unfinished_ingestions(spec.named_indices())
    return flow, query


def warn_unfinished_ingestions(indices: dict[str, str]) -> None:
    """One line on stderr per index (``{step: index}``) whose ingestion is unfinished: its searches would see only
    the committed part of the corpus, silently. Cheap when there is none (a listing of ``_ingest/``)."""
    from flows.ingestion.pending import describe, has_staged, unfinished
    from operators.store import resolve_index

    steps_of: dict[str, list[str]] = {}  # each index's path, resolved once, and the steps that read it
    for step, index in indices.items():
        steps_of.setdefault(str(resolve_index(index)), []).append(step)
    for path, steps in steps_of.items():
        try:
            records = unfinished(path) if has_staged(path) else []
        except (OSError, TesseraError):  # no index there: the step that reads it says so
            continue
        for record in records:
            print(f"tessera: warning: index {path} (step {', '.join(map(repr, steps))}): {describe(record)}",
                  file=sys.stderr, flush=True)


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR``, the step cache's folder: one definition for every command that runs flows or reads the
    cache (``run``, ``bench``, ``chat``, ``cache``), which ``step_cache`` and ``flows.bench`` read as
    ``args.cache_dir``."""
    parser.add_argument("--cache-dir", metavar="DIR", help="cache directory (default $TESSERA_HOME/cache)")


def refuse_file_as_index_name(given: str | None, option: str, source: str) -> None:
    """A bare index name that is a file in the working folder, for an index not made yet: the corpus file given as
    the index (the two swapped), which made an index named after the file. A path to it (``./corpus.jsonl``) is
    refused as a file already (``check_new_index_path``); an index made so before still opens."""
    from pathlib import Path

    from operators.store import resolve_index
    from operators.store.layout import MANIFEST, is_index_name

    if not given or not is_index_name(given) or not Path(given).is_file() or (resolve_index(given) / MANIFEST).exists():
        return
    raise CliError(f"{option} '{given}' is a file in this folder, where a bare name is an index under "
                   f"$TESSERA_HOME/indices: the corpus file goes in {source}, the index's name or folder in {option}",
                   field=option.lstrip("-"))


def refuse_cache_dir_without_cache(args: Any) -> None:
    """``--no-cache`` with ``--cache-dir``: the folder would be ignored without a word (as ``bench`` refuses
    ``--mlflow-uri`` with ``--no-mlflow``)."""
    if args.no_cache and getattr(args, "cache_dir", None):
        raise CliError("--no-cache and --cache-dir: give one (where the step cache is, or no cache)",
                       field="cache-dir")


def step_cache(args: Any):
    """The step cache of ``--cache-dir`` (default ``$TESSERA_HOME/cache``), or None with ``--no-cache``. One this
    process cannot write (a home on a read-only disk, a cache mounted so) is said now, once (``StepCache.read_only``):
    the run reads its stored results and stores nothing."""
    refuse_cache_dir_without_cache(args)
    if args.no_cache:
        return None
    from pathlib import Path

    from flows import uris
    from flows.cache import StepCache
    from flows.store import default_cache_dir

    cache_dir = getattr(args, "cache_dir", None)
    cache = StepCache(Path(uris.local_path(cache_dir, "cache-dir")) if cache_dir else default_cache_dir())
    cache.read_only()  # said before the run, not at its first step
    return cache
