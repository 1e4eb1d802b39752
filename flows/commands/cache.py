"""``tessera cache info | explain FLOW [STEP] | prune | clear``: what the step cache holds and keys on, bounding and
clearing it."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from flows.commands._support import (EXIT_OK, add_cache_dir_argument, add_set_argument, console, escape, load_flow,
                                     number, print_json, report, show_help)
from operators.byte_sizes import format_bytes
from operators.errors import SpecError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    cache = sub.add_parser("cache", help="inspect, prune or clear the step cache",
                           description="The step cache ($TESSERA_HOME/cache unless --cache-dir).")
    csub = cache.add_subparsers(title="actions", metavar="ACTION")
    c_info = csub.add_parser("info", parents=[common], help="what the cache holds: its size, stored outputs, steps "
                             "and when it was last used")
    add_cache_dir_argument(c_info)
    c_info.add_argument("--json", action="store_true", help="print JSON")
    c_info.set_defaults(handler=_cmd_cache_info)
    c_explain = csub.add_parser("explain", parents=[common], help="what goes into each step's cache key")
    c_explain.add_argument("flow", metavar="FLOW", help="spec file, built-in or saved flow name")
    c_explain.add_argument("step", metavar="STEP", nargs="?", help="only this step")
    c_explain.add_argument("--index", "-i", metavar="NAME_OR_PATH",
                           help="the index the flow ran with (tessera run --index): it is part of the step keys")
    add_set_argument(c_explain)  # a run's --set changes its steps' keys: explain that run
    add_cache_dir_argument(c_explain)
    c_explain.add_argument("--json", action="store_true", help="print JSON")
    c_explain.add_argument("--verbose", "-v", action="store_true",
                           help="list every module in a step's code digest (default: their count and the operator's "
                           "own)")
    c_explain.set_defaults(handler=_cmd_cache_explain)
    c_prune = csub.add_parser("prune", parents=[common], help="evict stored outputs unused for DAYS days, then the "
                              "least recently used until the cache holds at most SIZE")
    c_prune.add_argument("--max-size", metavar="SIZE", help="most the stored outputs may hold: bytes, or with K, M, "
                         "G or T (500M, 2G)")
    c_prune.add_argument("--older-than", metavar="DAYS", type=number, help="evict what no run used for DAYS days")
    add_cache_dir_argument(c_prune)
    c_prune.add_argument("--json", action="store_true", help="print JSON")
    c_prune.set_defaults(handler=_cmd_cache_prune)
    c_clear = csub.add_parser("clear", parents=[common], help="delete every cached step output (refuses a folder "
                              "that is not a step cache)")
    add_cache_dir_argument(c_clear)
    c_clear.add_argument("--operator", metavar="NAME", help="delete only this operator's stored outputs (every step, "
                         "params and version of it; an alias names it too) and keep the rest")
    c_clear.add_argument("--json", action="store_true", help="print what was removed as JSON")
    c_clear.set_defaults(handler=_cmd_cache_clear)
    cache.set_defaults(handler=lambda args: show_help(cache))


def _cache_root(args: argparse.Namespace) -> Path:
    from flows.store import default_cache_dir

    return Path(args.cache_dir) if args.cache_dir else default_cache_dir()


def cache_explanations(flow, root: Path, step: str | None = None) -> list[dict[str, Any]]:
    """Per step: what its key is made of now, and what the cache recorded at its last run."""
    from flows.cache import StepCache
    from flows.cache_code import module_digests, own_modules
    from flows.cache_keys import step_explain, step_key
    from flows.runner import caches

    steps = flow.needed_steps()
    if step is not None:
        if step not in flow.operators:
            raise SpecError(f"no step '{step}' in flow '{flow.name}' (steps: {', '.join(flow.order)})",
                            step=step, field="step")
        steps = [step]
    stored: dict[str, dict[str, Any]] = {}
    if (root / "index.sqlite").is_file():
        stored = {r["step"]: r for r in StepCache(root).explain(flow.name, step)}
    unset = set(flow.spec.unset_index_steps())
    out = []
    for s in steps:
        op = flow.operators[s]
        cached = flow.spec.steps[s].cache and caches(op)
        explained = step_explain(op)
        entry = {"step": s, **explained, "step_key": step_key(op, explained), "cached": cached,
                 "own_modules": own_modules(op)}
        last = stored.get(s)
        if last is not None:
            entry["last_run"] = last.get("last_run")
            entry["last_step_key"] = last.get("step_key")
            entry["changed"] = last.get("step_key") != entry["step_key"]
            entry["needs_index"] = s in unset  # a run's key had its index in it; explain was given none
            if entry["changed"]:
                entry["what_changed"] = what_changed(last, entry, module_digests(op))
        else:
            entry["last_run"] = None
        out.append(entry)
    return out


def _cmd_cache_explain(args: argparse.Namespace) -> int:
    from operators.store.layout import check_index_exists

    flow, _ = load_flow(args.flow, index=args.index, given=args.index, settings=args.set)
    if args.index:  # the flow reads it (load_flow refused it otherwise): a typo is said, as tessera run says it
        check_index_exists(args.index)
    root = _cache_root(args)
    entries = cache_explanations(flow, root, args.step)
    if args.json:
        print_json({"flow": flow.name, "cache_dir": str(root), "steps": entries})
        return EXIT_OK
    out = console()
    out.print(f"[bold]flow {escape(flow.name)}[/], cache {escape(str(root))}")
    for e in entries:
        out.print(f"\n[bold cyan]{escape(e['step'])}[/]  {e['op']} v{e['version']}, scope {e['scope']}"
                      + ("" if e["cached"] else "  [yellow](not cached)[/]"))
        out.print(f"  step key   {e['step_key']}")
        out.print(f"  identity   {escape(json.dumps(e['identity'], default=str))}")
        code = e["code"]
        packages = "".join(f", {escape(name)} {escape(v)}" for name, v in code.get("packages", {}).items())
        out.print(f"  code       tessera {escape(code['tessera'])}{packages}, source {code['source']} of "
                  f"{_modules_line(code['modules'], e['own_modules'], args.verbose)}")
        if e["scope"] == "row":
            reads = "every column" if e["reads"] is None else ", ".join(e["reads"])
            out.print(f"  unit       one row, hashed over: {escape(reads)}")
        elif e["scope"] == "query":
            out.print("  unit       one qid group, hashed over all its columns")
        elif e["scope"] == "corpus":
            out.print("  unit       the whole input, hashed over all its columns")
        else:
            out.print("  unit       (a source: its output is not cached)")
        last = e["last_run"]
        if last is None:
            out.print("  last run   never recorded in this cache")
        else:
            units, hits = last.get("units", 0), last.get("hits", 0)
            ratio = f" ({hits / units:.0%})" if units else ""
            out.print(f"  last run   {units} units, {hits} hits{ratio}")
            if e.get("changed") and e.get("needs_index"):
                out.print("  [yellow]the last run's key included its index[/]: pass the same --index to compare")
            elif e.get("changed"):
                out.print(f"  [yellow]changed since the last run[/] (was {e['last_step_key']}): "
                          f"{escape('; '.join(e['what_changed']))}; the last run's entries do not serve the next one "
                          "(an earlier run's with this key still may)", soft_wrap=True)
    return EXIT_OK


def _modules_line(modules: list[str], own: list[str], verbose: bool) -> str:
    """The modules of a step's code digest, for a person: all of them with ``--verbose``, else their count and the
    operator's own (up to 56 names on one line said nothing a user could act on)."""
    if not modules:
        return "no file"
    if verbose or len(modules) <= 3:
        return escape(", ".join(modules))
    shown = [m for m in own if m in modules] or modules[:1]
    return (f"{len(modules)} modules: {escape(', '.join(shown))} and {len(modules) - len(shown)} it imports "
            "(--verbose lists them)")


#: Fields of a step's explanation that go into its key, as ``what_changed`` names them.
_KEY_PARTS = (("op", "operator"), ("version", "version"), ("identity", "params/identity"), ("scope", "scope"),
              ("reads", "columns read"), ("writes", "columns written"))


def what_changed(last: dict[str, Any], now: dict[str, Any], digests: dict[str, str]) -> list[str]:
    """Which parts of a step's key differ from its last recorded run: the params, the operator's version, the
    Tessera or a plugin package's version, and which modules' files (the last run's ``module_digests``)."""
    def plain(value: Any) -> Any:  # as the record stores it
        return json.loads(json.dumps(value, default=str))

    out = [label for field, label in _KEY_PARTS if plain(last.get(field)) != plain(now.get(field))]
    was, code = last.get("code") or {}, now["code"]
    if was.get("tessera") != code["tessera"]:
        out.append(f"tessera {was.get('tessera')} -> {code['tessera']}")
    if (was.get("packages") or {}) != (code.get("packages") or {}):
        out.append("package versions " + ", ".join(f"{k} {v}" for k, v in (code.get("packages") or {}).items()))
    old = last.get("module_digests")
    if isinstance(old, dict):
        edited = sorted(m for m in digests.keys() & old.keys() if digests[m] != old[m])
        added, gone = sorted(digests.keys() - old.keys()), sorted(old.keys() - digests.keys())
        out += [f"{what} {', '.join(names)}" for what, names in
                (("edited", edited), ("now imported", added), ("no longer imported", gone)) if names]
    elif was.get("source") != code["source"]:
        out.append("code (the last run predates the record of which module)")
    return out or ["the key"]


def _cmd_cache_info(args: argparse.Namespace) -> int:
    from flows.cache import StepCache

    root = _cache_root(args)
    held = StepCache(root).summary()
    if held is None:
        report(args, {"cache_dir": str(root), "exists": False}, f"no step cache at {root} (a run with the cache "
               "on makes it)")
        return EXIT_OK
    used = f"; last used {_when(held['last_use'])}, least recently {_when(held['least_recent_use'])}" \
        if held["files"] else ""
    report(args, {"cache_dir": str(root), "exists": True, **held},
           f"step cache {root}: {format_bytes(held['bytes'])} in {held['files']:,} file(s), {held['units']:,} stored "
           f"unit(s) of {held['steps']} step(s) of {held['flows']} flow(s)"
           + (f", {held['calls']:,} saved model call(s)" if held["calls"] else "") + used
           + (f"\nunits by operator: {', '.join(f'{name} {n:,}' for name, n in held['operators'].items())} (tessera "
              "cache clear --operator NAME clears one)" if held["operators"] else "")
           + "\nbound it with tessera cache prune --max-size SIZE or --older-than DAYS")
    return EXIT_OK


def _when(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _nothing_of(given: str, operator: str, root: Path) -> str:
    """Why ``clear --operator`` removed nothing: the operator the name resolved to (``bm25``, a step's usual name, is
    the alias of ``retrieve.bm25``) and the operators the cache does hold outputs of."""
    from flows.cache import StepCache

    names = "" if given == operator else f" ('{given}' names the operator {operator})"
    held = [name for name in ((StepCache(root).summary() or {}).get("operators") or {}) if name != "(other)"]
    return (f"nothing of {operator} stored at {root}{names}"
            + (f"; it holds outputs of {', '.join(held)}" if held else ""))


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    from flows.cache import StepCache

    root = _cache_root(args)
    if args.operator is not None:
        done = StepCache(root).clear_operator(args.operator)
        said = (f"{done['units']:,} stored unit(s)" + (f", {done['calls']:,} saved model call(s)" if done["calls"]
                else "") + f" in {done['files']:,} file(s), {format_bytes(done['bytes'])}")
        report(args, {"cache_dir": str(root), **done},
               f"cleared {done['operator']} from {root}: removed {said}" if done["units"] or done["calls"]
               else _nothing_of(args.operator, done["operator"], root))
        return EXIT_OK
    files, size = _stored(root)
    cleared = StepCache(root).clear()
    report(args, {"cache_dir": str(root), "cleared": cleared, "files": files if cleared else 0,
                  "bytes": size if cleared else 0},
           f"cleared {root}: removed {files} stored output file(s), {format_bytes(size)}" if cleared
           else f"nothing to clear at {root}")
    return EXIT_OK


def _stored(root: Path) -> tuple[int, int]:
    """Files and bytes of the stored outputs (``data/``), counted before a clear removes them; links not followed."""
    import os

    files = size = 0
    for folder, _, names in os.walk(root / "data"):
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink():
                files, size = files + 1, size + path.stat().st_size
    return files, size


def _cmd_cache_prune(args: argparse.Namespace) -> int:
    from flows.cache import StepCache
    from flows.cache_prune import parse_size

    if args.max_size is None and args.older_than is None:
        raise SpecError("give --max-size SIZE, --older-than DAYS or both", field="--max-size")
    try:
        max_bytes = None if args.max_size is None else parse_size(args.max_size)
    except ValueError as err:
        raise SpecError(str(err), field="--max-size") from None
    if args.older_than is not None and not math.isfinite(args.older_than):  # nan compares false: it pruned nothing
        raise SpecError(f"'{args.older_than:g}' is not a number of days: give one such as 30 or 0.5",
                        field="--older-than")
    if args.older_than is not None and args.older_than < 0:
        raise SpecError(f"must not be negative, got {args.older_than:g}", field="--older-than")
    root = _cache_root(args)
    older = None if args.older_than is None else args.older_than * 86400
    done = StepCache(root).prune(max_bytes=max_bytes, older_than_s=older)
    found = root.exists()  # as clear says: no cache there is nothing to prune, not a prune that removed nothing
    report(args, {"cache_dir": str(root), "pruned": found, **done},
           f"pruned {root}: removed {done['files']} file(s), {done['units']} unit(s)"
           + (f", {done['unfinished']} unfinished write(s)" if done.get("unfinished") else "")
           + (f", {done['calls']} saved model call(s)" if done.get("calls") else "")
           + f", {format_bytes(done['bytes'])}; "
           f"left {done['files_left']} file(s), {format_bytes(done['bytes_left'])}" if found
           else f"nothing to prune at {root}")
    return EXIT_OK
