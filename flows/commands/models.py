"""``tessera models [NAME...] [--check] [--json]``: the language-model aliases and which are reachable;
``tessera models prune [--yes] [--json]``: the model files Tessera made that nothing reads.

Reachable is decided without sending a prompt (the embedded model: its weights and llama.cpp
are installed; Ollama: its server answers on ``$OLLAMA_API_BASE``; API models: the key
variable is set; a server named by ``api_base``: it answers ``GET /models``). ``--check``
sends each reachable model one tiny prompt and reports the reply's seconds and tokens.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from flows.commands._support import EXIT_OK, CliError, console, escape, print_json
from operators.errors import see_docs

if TYPE_CHECKING:
    from operators.llm.aliases import ModelAlias


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("models", parents=[common], help="list the language-model aliases and which answer",
                            description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""))
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="only these aliases; prune: list the model files Tessera made that nothing reads "
                        "(with --yes: remove them)")
    parser.add_argument("--check", action="store_true",
                        help="send each reachable model one tiny prompt (max 8 tokens) and time it")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--yes", action="store_true",
                        help="with prune: remove what it lists (without: only list it)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """List the aliases with their litellm model, where each is defined, and whether it can be reached."""
    if args.names[:1] == ["prune"]:
        from flows.commands.models_prune import prune

        if len(args.names) > 1 or args.check:  # the field is what was given besides
            raise CliError("tessera models prune takes only --yes and --json",
                           field="--check" if args.check else "NAME")
        return prune(args.yes, args.json)
    if args.yes:
        raise CliError("--yes goes with tessera models prune", field="--yes")
    from operators.llm.aliases import alias_sources, aliases, user_file
    from operators.llm.reachable import reachability

    found = aliases()
    unknown = [n for n in args.names if n not in found]
    if unknown:
        raise CliError(f"no model alias {', '.join(_with_close_names(name, found) for name in unknown)}; aliases: "
                       f"{', '.join(found)}", field="NAME")
    sources = alias_sources()
    rows: list[dict[str, Any]] = []
    for name, alias in found.items():
        if args.names and name not in args.names:
            continue
        ok, why = reachability(alias)
        row = {"alias": name, "model": alias.model, "description": alias.description,
               "defined_in": sources.get(name, "packaged"), "reachable": ok, "why": why}
        if args.check and ok:
            row["check"] = _check(name, alias)
        rows.append(row)
    if args.json:
        user = user_file()
        print_json({"models": rows, "user_file": str(user) if user else None})
        return EXIT_OK
    from rich.table import Table

    table = Table(title="models", title_justify="left", title_style="bold")
    for col in ("alias", "litellm model", "reachable", "why", *(("check",) if args.check else ())):
        table.add_column(col, overflow="fold")
    for row in rows:
        mark = "[green]yes[/]" if row["reachable"] else "[red]no[/]"
        check = _check_text(row["check"]) if "check" in row else ""
        table.add_row(escape(row["alias"]), escape(row["model"]), mark, escape(row["why"]),
                      *((escape(check),) if args.check else ()))
    out = console()
    out.print(table)
    user = user_file()
    out.print(f"aliases: {escape(str(user)) if user else 'packaged only'} (override in $TESSERA_HOME/models.yaml "
              f"or the file named by $TESSERA_MODELS); see {see_docs('llm', 'Model aliases')}")
    return EXIT_OK


def _with_close_names(name: str, found: dict[str, Any]) -> str:
    """A misspelt alias with the aliases close to it, as other unknown names are said: ``gemma (did you mean
    'gemma2'?)``."""
    from operators.errors import close_names

    close = close_names(name, found)
    return name + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")


def _check(name: str, alias: ModelAlias) -> dict[str, Any]:
    """One tiny prompt, waited for as long as the alias's ``timeout`` says (a run's calls wait as long; without one,
    the gateway's default): a fixed 60 s was too short for the embedded model on a busy CPU (its alias says 300)
    and too long for an alias that says 3. Its outcome as fields, which ``--json`` prints as they are (it printed
    the table's sentence, which a script had to parse)."""
    from operators.llm import LLMError, complete

    try:
        done = complete("Reply with the word OK.", model=name, max_tokens=8, timeout=alias.timeout, num_retries=0)
    except LLMError as err:
        return {"answered": False, "error": err.message}
    return {"answered": True, "seconds": round(done.seconds, 3), "prompt_tokens": done.prompt_tokens,
            "completion_tokens": done.completion_tokens, "reply": done.text.strip()}


def _check_text(check: dict[str, Any]) -> str:
    """The check's outcome as the table says it."""
    if not check["answered"]:
        return f"failed: {check['error']}"
    return f"answered in {check['seconds']:.2f} s ({check['prompt_tokens']}+{check['completion_tokens']} tokens): " \
           f"{check['reply'][:40]!r}"
