"""``tessera chat [FLOW] --index INDEX``: a conversation with a flow that answers, in the terminal.

Each line is a question. The flow (``rag`` by default) runs on the local executor with the
conversation so far in the query's ``messages`` column, so a follow-up ("how do they make
it?") is searched for with the turns before it (``query.contextualize``, as the service's
``/v1/chat/completions`` does). The answer prints with its numbered sources and, for a
follow-up, what was searched for; the answer prints as the model writes it
(``operators.generate.answer_stream``). ``/new`` starts a new conversation; ``/exit`` or the end of input
(Ctrl-D) ends it; ``/help`` lists these. An empty line is skipped, on a terminal as in piped input: a paste with a
blank line in it ended the chat there and left its further lines to the shell.
On a terminal, Ctrl-C during an answer stops that answer and asks for the next question (the conversation
stays); at the prompt it ends the chat. The terminal's line editor (``readline``) reads the questions: without it
the terminal cut a line at 4,095 characters without a word.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

from flows.commands._results import print_answer_notes
from flows.commands._support import (EXIT_OK, CliError, add_cache_dir_argument, add_set_argument, console, escape,
                                     load_flow, refuse_cache_dir_without_cache, step_cache)
from flows.query_limits import check_length, max_query_chars
from operators.errors import SpecError
from operators.generate.answer_stream import ANSWER_OP, rest_of, streaming_answers
from operators.store.layout import DEMO_INDEX, MANIFEST, SAMPLE_NAME, default_index
from operators.unicode import blank

#: ``tessera chat --help``'s examples (tests/flows/test_cli_parsing.py parses each).
EXAMPLES = ("tessera chat", "tessera chat rag_multihop --index NAME --model gemma2",
            "tessera chat --json < questions.txt > answers.jsonl")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("chat", parents=[common], help="ask a flow that answers questions, follow-ups included",
                            description=handle.__doc__, epilog="Examples: " + "; ".join(EXAMPLES))
    parser.add_argument("flow", metavar="FLOW", nargs="?", default="rag",
                        help="a flow with a generate.answer step: built-in (rag, rag_multihop), saved, or a spec "
                        "file (default: rag)")
    parser.add_argument("--index", "-i", metavar="NAME_OR_PATH",
                        help=f"index for the retrieval steps that leave params.index unset (default: {DEMO_INDEX}, "
                        f"make demo's in a clone, when it is there, else $TESSERA_HOME's '{SAMPLE_NAME}')")
    parser.add_argument("--model", metavar="ALIAS",
                        help="language model of the flow's LLM steps (an alias, `tessera models`, or a litellm "
                        "string); default: the flow's own")
    parser.missing_options = dict.fromkeys(
        ("--queries", "-q", "--question", "--query"), "chat reads its questions from standard input, one a line: "
        "echo QUESTION | tessera chat --json; tessera run rag -q QUESTION answers one too")
    add_set_argument(parser)
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the step cache")
    add_cache_dir_argument(parser)
    parser.add_argument("--json", action="store_true", help="for scripts: one JSON line per answer on stdout "
                        "(question, answer, sources, references, searched for; a line not asked says why), not "
                        "streamed; notes on stderr")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Ask a flow that answers (rag by default) one question a line; follow-ups are searched for with the
    conversation before them. /new starts over; /exit or the end of input (Ctrl-D) ends; /help lists these; empty
    lines are skipped."""
    from flows.executors import make_executor
    from flows.model_check import check_env, check_models
    from flows.train import train_command
    from operators.llm.reachable import ModelUnreachableError

    refuse_cache_dir_without_cache(args)
    flow = _answering_flow(args)
    check_models([flow], how_to_make=train_command)
    try:  # a model's key unset, its Ollama server not answering: said before the greeting, not at each question
        check_env(flow)
    except ModelUnreachableError as err:
        if args.model is None:  # the flow's own model: the error names its step and field
            raise
        raise CliError(f"model '{err.model}' cannot be reached: {err.why}; or give another --model (tessera models "
                       "says which answer)", field="--model") from None
    cache = step_cache(args)
    if cache is not None:
        cache.check()  # a bad --cache-dir or $TESSERA_HOME is said now, not after the first question
    executor = make_executor("local", cache=cache, keep_history=False)
    out, interactive = console(stderr=args.json), sys.stdin.isatty()
    index = _index_of(flow)
    if index:  # a bad --index is said now, not after the first question
        from operators.store import Index, IndexStoreError, resolve_index

        try:
            Index.open(resolve_index(index), verify=False)
        except IndexStoreError as err:
            if args.index:  # named as tessera run names it; the flow's own index is no option
                err.field = err.field or "index"
            raise
    over = f" over {index}" if index else ""
    out.print(f"[bold]{escape(flow.name)}[/]{escape(over)}: ask a question (/new starts over, /exit ends, "
              "/help lists more)")
    conversation: list[dict[str, str]] = []
    turn, longest = 0, max_query_chars()  # a bad TESSERA_MAX_QUERY_CHARS: said now, before the first question
    while True:
        question = _read(interactive, prompt_to=out.file)
        if question is None or question in ("/exit", "/quit"):
            if question is None and interactive:
                out.print()  # Ctrl-D: the shell's prompt on a line of its own
            return EXIT_OK
        if question == "/new":
            conversation = []
            out.print("[dim]a new conversation[/]")
            continue
        if question == "/help":
            out.print(_HELP, soft_wrap=True)
            continue
        if (why := _not_asked(question, longest)) is not None:  # said, and the chat goes on: nothing was searched
            out.print(f"[yellow]{escape(why)}[/]", soft_wrap=True)  # for or sent to the model
            if args.json:  # its line too: a script that reads a line per question it wrote waited for ever
                _print_not_asked_line(question, why)
            continue
        turn += 1
        if cache is not None:
            cache.ask_again()  # a disk freed since the last question is written again
        if args.json:
            meta = _ask(executor, flow, str(turn), question, conversation)
            answer = _print_json_line(turn, question, meta)
            conversation += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            continue
        printer, stop = _AnswerPrinter(out, spinner=interactive), _StopAnswerOnCtrlC(interactive)
        with stop, printer, streaming_answers(printer.piece), _degraded_said_once():
            meta = _ask(executor, flow, str(turn), question, conversation)
        if stop.stopped:
            out.print(("\n" if printer.sent else "") + "[dim]answer stopped (Ctrl-C); ask again, or Ctrl-D to end[/]")
            continue  # the unfinished turn stays out of the conversation
        answer = printer.finish(meta)
        conversation += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


#: What ``/help`` says: the commands, and the keys that stop an answer or end the chat.
_HELP = ("/new starts a new conversation (follow-ups no longer refer to the questions before it); /exit or Ctrl-D "
         "ends the chat; Ctrl-C stops an answer being written (at the prompt it ends the chat). Any other line is "
         "a question; a follow-up is searched for with the conversation before it.")


def _print_json_line(turn: int, question: str, meta: dict[str, Any]) -> str:
    """One answer as one JSON line on stdout (``--json``: a scripted chat reads a line per question); the answer."""
    answer = str(meta.get("answer") or "").strip()
    line = {"turn": turn, "question": question, "answer": answer, "sources": meta.get("sources") or [],
            "references": meta.get("references") or [], "searched_for": meta.get("standalone_query"),
            **({"answer_cut": True} if meta.get("answer_cut") else {}),
            **({"abstained": True} if meta.get("abstained") else {}),
            **({"degraded": meta["degraded"]} if meta.get("degraded") else {})}
    sys.stdout.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return answer


def _not_asked(question: str, longest: int) -> str | None:
    """Why a line is not asked, or None: a mistyped command (/quite), bytes that are not UTF-8 or only control
    characters (``_unreadable``), a question over the query limit (as tessera run and the service)."""
    if re.fullmatch(r"/\w+", question):  # no question to search for
        return f"unknown command {question}: /new starts over, /exit ends, /help lists more"
    if (unreadable := _unreadable(question)) is not None:
        return unreadable
    try:
        check_length(question, "the question", longest)
    except SpecError as err:
        return f"{err.message}; ask a shorter one"
    return None


def _print_not_asked_line(question: str, why: str) -> None:
    """``--json``: a line not asked, as one JSON line (no turn, no answer) that says why; a byte that is not UTF-8
    is written as U+FFFD (a lone surrogate cannot be written as UTF-8)."""
    text = question.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    line = {"turn": None, "question": text, "answer": None, "not_asked": why}
    sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _answering_flow(args: argparse.Namespace) -> Any:
    """The flow, its index filled in and the model set; a usage error when it does not answer or lacks an index."""
    index = args.index
    if index is None and (Path(candidate := default_index()) / MANIFEST).is_file():
        index = candidate
    flow, _ = load_flow(args.flow, index=index, given=args.index, settings=args.set)
    if not any(op.name == ANSWER_OP for op in flow.operators.values()):
        raise CliError(f"flow '{flow.name}' gives no answer (it has no {ANSWER_OP} step): use rag, rag_multihop "
                       "or a flow of your own that answers", field="flow")
    for step_id, cls in flow.spec.unset_index_steps().items():
        raise CliError(f"operator {cls.name} needs an index: pass --index NAME_OR_PATH (built by tessera ingest); "
                       f"without it, chat reads {DEMO_INDEX} in this folder ({Path.cwd()}), else "
                       f"$TESSERA_HOME's '{SAMPLE_NAME}', and neither is there (tessera ingest --source FILE --index "
                       f"{SAMPLE_NAME} makes the second, from any folder)",
                       step=step_id, field="params.index")
    if args.model is None:
        return flow
    from operators.llm.aliases import key_env, unknown_model
    from operators.llm.step import LLMStep

    if (problem := unknown_model(args.model)) is not None:  # the option, not the first step it would be given to
        raise CliError(problem, field="--model")
    if (variable := key_env(args.model)) is not None and not os.environ.get(variable):  # said now, not after the
        raise CliError(f"model '{args.model}' reads ${variable}, which is not set: set it, or give another "  # greeting
                       "--model (tessera models lists them, and says which are reachable)", field="--model")
    steps = dict(flow.spec.steps)
    for step_id, op in flow.operators.items():
        if isinstance(op, LLMStep):
            steps[step_id] = steps[step_id].model_copy(update={"params": {**steps[step_id].params,
                                                                          "model": args.model}})
    return flow.spec.model_copy(update={"steps": steps}).build()


def _index_of(flow: Any) -> str | None:
    """The index the flow's first retrieval step reads, to say what the answers come from."""
    return next((str(step.params["index"]) for step in flow.spec.steps.values() if step.params.get("index")), None)


def _unreadable(question: str) -> str | None:
    """Why a line is no question to ask, or None: bytes that are not UTF-8 (read as lone surrogates, which ended the
    chat with an internal error), or only control characters (a NUL: no word to search for, which the service
    refuses as an empty message and which went into every later follow-up's search)."""
    if (byte := next((ord(char) - 0xDC00 for char in question if "\udc80" <= char <= "\udcff"), None)) is not None:
        return f"that line is not UTF-8 text (byte 0x{byte:02x}): not asked; save the questions as UTF-8"
    if blank(question):
        return "that line holds only control characters: not asked"
    return None


def _read(interactive: bool, prompt_to: Any) -> str | None:
    """The next question, or None at the end of input; blank lines are skipped (a file of questions with a blank
    line in it ended the chat there, its further questions unanswered; on a terminal, a pasted text with a blank line
    did, and its lines after it went to the shell as commands). On a terminal the prompt goes where the greeting
    went: with ``--json``, stderr (``input`` wrote it to stdout, into ``tessera chat --json > answers.jsonl``)."""
    if interactive:
        _line_editor()
        try:
            while not (line := _prompted("you> ", prompt_to).strip()):
                pass
            return line
        except EOFError:
            return None
        except KeyboardInterrupt:  # Ctrl-C at the prompt ends the chat: "tessera: interrupted" on a line of its own,
            prompt_to.write("\n")  # not after what was typed
            prompt_to.flush()
            raise
    while line := sys.stdin.readline():
        if line.strip():
            return line.strip()
    return None


def _prompted(prompt: str, stream: Any) -> str:
    """A line typed after ``prompt``, written to ``stream``: through ``input`` for stdout (readline redraws it)."""
    if stream is sys.stdout:
        return input(prompt)
    stream.write(prompt)
    stream.flush()
    return input()


def _line_editor() -> None:
    """Let ``input`` read through readline (editing, history, and lines of any length: the terminal's own line
    discipline cut a pasted question at 4,095 characters); absent on some platforms, where input reads as it can."""
    try:
        import readline  # noqa: F401  (importing it is what makes input() use it)
    except ImportError:
        pass


class _DegradedWarnings(logging.Filter):
    """Drops the warning a step logs for a query it could not serve ("query 1 keeps its input: ..."): the chat says
    it under the answer, once (the warning, then the same reason in the answer's line, said it twice)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.funcName != "degrade"  # Operator.degrade's warnings, not a line of their words


@contextlib.contextmanager
def _degraded_said_once() -> Any:
    """While a question is answered on screen, the steps' degraded-query warnings are left to ``finish``."""
    logger, warnings = logging.getLogger("operators.base"), _DegradedWarnings()
    logger.addFilter(warnings)
    try:
        yield
    finally:
        logger.removeFilter(warnings)


class _StopAnswerOnCtrlC:
    """On a terminal, a Ctrl-C while a question is answered stops that answer (the embedded model's evaluation
    too, ``operators.llm.loading``) and the chat goes on; SIGTERM, which ``_signals`` hands to this handler,
    still ends the command, as does Ctrl-C with piped input."""

    def __init__(self, interactive: bool) -> None:
        self.interactive, self.signum, self.saved = interactive, None, None

    @property
    def stopped(self) -> bool:
        return self.signum == signal.SIGINT

    def __enter__(self) -> "_StopAnswerOnCtrlC":
        if self.interactive:
            self.saved = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def _interrupt(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        raise KeyboardInterrupt

    def __exit__(self, kind: Any, *exc: Any) -> bool:
        if self.saved is not None:
            signal.signal(signal.SIGINT, self.saved)
        return kind is not None and issubclass(kind, KeyboardInterrupt) and self.stopped


def _ask(executor: Any, flow: Any, qid: str, question: str, conversation: list[dict[str, str]]) -> dict[str, Any]:
    """The flow's metadata for one question, the conversation before it in its ``messages`` column."""
    import pyarrow as pa

    queries = pa.table({"qid": [qid], "query": [question],
                        "messages": pa.array([json.dumps(conversation) if conversation else None], pa.string())})
    return executor.run(flow, queries).metadata.get(qid, {})


class _AnswerPrinter:
    """Prints one answer: a spinner while the flow searches (on a terminal), the answer as the model writes it,
    then its end, its sources and what was searched for."""

    def __init__(self, out: Any, spinner: bool) -> None:
        self.out, self.sent = out, ""
        self.status = out.status("searching and answering…") if spinner else None

    def __enter__(self) -> "_AnswerPrinter":
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.status is not None:
            self.status.stop()

    def piece(self, _qid: str, text: str) -> None:
        """The answer's next piece, as the model writes it."""
        if not self.sent:
            self.__exit__()
            self.out.print("[bold]answer[/]: ", end="")
        self.out.print(escape(text), end="", soft_wrap=True)
        self.out.file.flush()
        self.sent += text

    def finish(self, meta: dict[str, Any]) -> str:
        """Print the rest of the answer, its sources and what was searched for; the answer as the conversation
        keeps it ('' when none was written)."""
        out, answer = self.out, str(meta.get("answer") or "").strip()
        if self.sent:  # a later label rewrote the answer (rare): the words shown stand
            out.print(escape(rest_of(answer, answer, self.sent, degraded=False)), soft_wrap=True)
        degraded = meta.get("degraded") or {}
        if not answer:
            reason = degraded.get("reason", "the flow wrote no answer")
            out.print(f"[bold]answer[/]: [red]no answer could be written ({escape(str(reason))})[/]", soft_wrap=True)
            return ""
        if not self.sent:
            out.print(f"[bold]answer[/]: {escape(answer)}")
        print_answer_notes(out, meta)  # as `tessera run` says them
        if degraded:  # an earlier step failed (the follow-up's rewriting): the answer is written without it
            out.print(f"  [yellow]step {escape(str(degraded.get('step')))} failed: "
                      f"{escape(str(degraded.get('reason')))}[/]", soft_wrap=True)
        for reference in meta.get("references") or []:
            _indented(out, str(reference))
        if not meta.get("references"):
            out.print("  sources: none cited")
        if meta.get("standalone_query"):
            _indented(out, f"searched for: {meta['standalone_query']}", style="dim")
        return answer


def _indented(out: Any, text: str, style: str = "") -> None:
    """``text`` under the answer, its every line indented: on a narrow terminal the wrapped lines of a long source
    or search began at the margin, as if a line of their own."""
    lines = textwrap.wrap(text, width=max(out.width, 20), initial_indent="  ", subsequent_indent="  ",
                          break_on_hyphens=False)
    out.print("\n".join(lines), style=style, soft_wrap=True, markup=False, highlight=False)
