"""The ``tessera`` command: one parser, one module per subcommand.

Each subcommand module defines ``register(subparsers, common)``, which adds its parser
with ``set_defaults(handler=...)``; a handler takes the parsed arguments and returns an
exit status. The job entry points (``python -m flows.run|ingest|bench|train``, what
``ray job submit`` runs) are the same subcommands as commands of their own
(``standalone_main``). This wing sits on top: it imports the jobs and the engine, and
nothing imports it but those entry points.

Exit status: 0 done; 2 a bad spec, parameter, operator, file or argument (one line on
stderr naming the step and field; an unknown option with the usage of the command it was given
to); 1 an unexpected internal error; 130 cancelled by Ctrl-C (SIGINT), 143 by SIGTERM, which takes
the same graceful path (``signals``). ``--debug`` (or ``TESSERA_DEBUG=1``), before or after the
command, prints the traceback of an error.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import shlex
import signal
import sys
from typing import Callable, Sequence

from flows.commands._log_lines import hide_notes, warnings_as_command_lines
from flows.commands._signals import exit_within_grace, stop_reason, stop_signals_as_interrupt, stopped_status
from flows.executors.stderr_filter import filter_known_ray_noise
from flows.commands._support import EXIT_CANCELLED, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, named_as_typed, typed_options
from operators.errors import FlowCancelled, TesseraError, one_line, short_repr
from operators.outbound import use_local_policy_unless_set
from operators.redact import install_log_redaction

#: ``TESSERA_DEBUG`` values (any case) that print tracebacks, and those that do not; any other is refused (exit 2).
DEBUG_ON, DEBUG_OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")

#: The subcommands, in the order ``tessera --help`` lists them (each a module of this package).
SUBCOMMANDS = ("ops", "run", "chat", "flows", "models", "cache", "ingest", "index", "bench", "train", "serve", "keys",
               "docs")


def main(argv: Sequence[str] | None = None) -> int:
    """``tessera ...``; returns the exit status (the console script exits with it)."""
    if argv is None:  # a command of its own, not a call from Python: see flows.executors.stderr_filter
        filter_known_ray_noise()
        # Python's last garbage collection at exit walked every object litellm, torch and Ray made: 2-4 s after the
        # command's last line on 2 busy cores (0.2 s frozen, measured side by side). Frozen, objects left in
        # reference cycles are not finalised at exit; Tessera closes its files and stops its servers before then.
        atexit.register(gc.freeze)
    parser = build_parser()
    typed = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(typed)
    args.command_line = ["tessera", *typed]  # as typed: what a stopped command says to run again (``tessera ingest``)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if argv is None:
        _own_log_lines(args)
    return _exiting(run_handler(args.handler, args), argv)


def _own_log_lines(args: argparse.Namespace) -> None:
    """A command of its own prints Tessera's log records as its lines, notes hidden by ``--quiet`` (_log_lines); a
    call from Python keeps its logging as it is."""
    warnings_as_command_lines()
    if getattr(args, "quiet", False):
        hide_notes()


class _Parser(argparse.ArgumentParser):
    """A parser whose subcommands report an unknown option themselves, with their own usage
    (``usage: tessera run ...``), instead of handing it up to ``tessera``'s usage, naming the options it may have
    meant. No option is taken for a longer one it begins: ``tessera bench --index NAME`` was ``--index-dir NAME``,
    and built the dataset's indices in a folder named NAME."""

    root = False
    #: The option that takes what a user may give without one (``tessera ingest docs.jsonl`` for ``--source``), named
    #: with the value when such a value is left over.
    loose_values: str | None = None
    #: What to say of an option the command does not have but a user reaches for (``tessera ingest --model``):
    #: {option: where that setting lives}.
    missing_options: dict[str, str] = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not self.root:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._meant(extras)}")
        return namespace, extras

    def _meant(self, extras: list[str]) -> str:
        """`` (did you mean '--index-dir'?)`` for the first unknown option: the options it begins, else those it
        is close to."""
        from operators.errors import close_names, did_you_mean

        # an unknown short option is an option too: its value is no loose query (`tessera run bm25 -k 5` said "did
        # you mean --queries 5?")
        given = next((e.split("=", 1)[0] for e in extras if e.startswith("-") and not _number(e)), None)
        if given is None:
            loose = [e for e in extras if not e.startswith("-")]
            return f" (did you mean {self.loose_values} {shlex.join([' '.join(loose)])}?)" if \
                self.loose_values and loose else ""
        if given in self.missing_options:
            return f" ({self.missing_options[given]})"
        if not given.startswith("--"):
            return ""
        known = [option for option in self._option_string_actions if option.startswith("--")]
        # compared without the dashes every option has: '--model' came out close to '--help' by them
        close = [option for option in known if option.startswith(given)] or \
            [f"--{name}" for name in close_names(given[2:], [option[2:] for option in known])]
        return f" ({did_you_mean(close)})" if close else ""


def _number(value: str) -> bool:
    """Whether ``value`` is a number (``-1``, a value), not an option."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS: a subcommand's parser leaves ``debug`` alone unless given, so ``tessera --debug ops`` keeps it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="print the traceback of an error")
    parser = _Parser(
        prog="tessera",
        description="Tessera: retrieval and RAG pipelines as DAGs of operators.",
        epilog="Run 'tessera COMMAND --help' for a command's options.",
    )
    parser.root = True
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error (also after COMMAND)")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"flows.commands.{name}").register(subparsers, common)
    for sub in _subparsers(parser):  # a command group (``flows``, ``index``, ``cache``) takes it too
        if "--debug" not in sub._option_string_actions:
            sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="print the traceback of an error")
        sub.set_defaults(typed_options=typed_options(sub))  # a subcommand's own overrides its group's
    return parser


def _subparsers(parser: argparse.ArgumentParser):
    """Every parser below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield sub
                yield from _subparsers(sub)


def _version() -> str:
    """The installed package's version (``pip show tessera``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tessera")
    except PackageNotFoundError:  # run from a clone that was never installed
        return "unknown (not installed)"


def standalone_main(handler: Callable[[argparse.Namespace], int],
                    add_arguments: Callable[[argparse.ArgumentParser], None], argv: Sequence[str] | None, *,
                    prog: str, description: str | None, epilog: str | None = None) -> int:
    """One subcommand as a command of its own (``python -m flows.run``, ``flows.ingest``, ``flows.bench``,
    ``flows.train``): its arguments plus ``--debug``, errors reported as ``tessera``'s are."""
    if argv is None:
        filter_known_ray_noise()
    parser = _Parser(prog=prog, description=description, epilog=epilog)
    add_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    parser.set_defaults(typed_options=typed_options(parser))
    typed = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(typed)
    args.command_line = [*prog.split(), *typed]
    if argv is None:
        _own_log_lines(args)
    return _exiting(run_handler(handler, args), argv)


def _exiting(status: int, argv: Sequence[str] | None) -> int:
    """``status``; a command of its own that was stopped (130, 143) is ended if its exit hangs (``exit_within_grace``:
    not a call from Python, whose process goes on)."""
    if argv is None and status in (EXIT_CANCELLED, stopped_status(signal.SIGTERM)):
        exit_within_grace(status)
    return status


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; turn errors into one line on stderr and an exit status."""
    use_local_policy_unless_set()  # the user wrote the spec: a local service on loopback may be called
    install_log_redaction()
    setting = os.environ.get("TESSERA_DEBUG", "")
    word = setting.strip().lower()
    if word not in DEBUG_ON + DEBUG_OFF:  # `false` printed tracebacks: anything but 0 did
        _error(f"error: TESSERA_DEBUG must be 1, true, yes or on (print tracebacks), or empty, 0, false, no or off "
               f"(got {short_repr(setting)})")
        return EXIT_USAGE
    debug = getattr(args, "debug", False) or word in DEBUG_ON
    with stop_signals_as_interrupt() as stopped:
        status = _run_handler(handler, args, debug, stopped)
    return stopped.status(status)


def _run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace, debug: bool,
                 stopped: stop_signals_as_interrupt) -> int:
    try:
        return handler(args)
    except FlowCancelled as err:
        _error(f"cancelled: {err}")
        return EXIT_CANCELLED
    except TesseraError as err:
        if debug:
            import traceback

            traceback.print_exc()
        from flows.ingestion.first_ingest import with_resume

        _error(f"error: {named_as_typed(with_resume(err), getattr(args, 'typed_options', {}))}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted" if stopped.signum is None else f"terminated ({stop_reason(stopped.signum)})")
        return EXIT_CANCELLED
    except SystemExit as err:
        if not stopped.by_ray(err):
            raise
        _error(f"terminated ({stop_reason(stopped.signum)})")
        return EXIT_CANCELLED
    except BrokenPipeError:  # `tessera ops | head`
        try:
            sys.stdout = open(os.devnull, "w", encoding="utf-8")
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
    print(f"tessera: {one_line(message)}", file=sys.stderr, flush=True)


