"""``tessera ops [NAME...] [--json | --format table|json|mosaic]``: the registered operators."""

from __future__ import annotations

import argparse
import json
from typing import Any

from flows.commands._support import EXIT_OK, console, escape, print_json


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    ops = sub.add_parser("ops", parents=[common], help="describe the registered operators",
                         description="Pipeline info for every registered operator, generated from the registry.")
    ops.add_argument("names", nargs="*", metavar="NAME", help="only these operators (ids or aliases)")
    style = ops.add_mutually_exclusive_group()  # --json --format mosaic: one of them would be dropped unsaid
    style.add_argument("--format", choices=("table", "json", "mosaic"), default="table",
                       help="table (default), json (Tessera's info) or mosaic (mosaicRAG's /pipeline/info)")
    style.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    ops.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from flows import info
    from operators.registry import all_operators, get_operator

    classes = [get_operator(n) for n in args.names] if args.names else list(all_operators().values())
    if args.format == "mosaic":
        print_json({cls.name: info.mosaic_step_info(cls) for cls in classes})
        return EXIT_OK
    infos = {cls.name: info.operator_info(cls) for cls in classes}
    if args.format == "json":
        print_json(infos)
        return EXIT_OK
    from rich.table import Table

    out = console()
    if args.names:  # one table of parameters per operator
        for item in infos.values():
            _print_operator(out, item)
        return EXIT_OK
    table = Table(title=f"{len(infos)} operators", show_lines=False, expand=False)
    table.add_column("operator", style="bold cyan", no_wrap=True)
    table.add_column("scope")
    table.add_column("description")
    table.add_column("parameters (default)")
    for item in infos.values():
        params = ", ".join(_param_summary(name, p) for name, p in item["parameters"].items())
        table.add_row(item["id"], item["scope"], escape(item["description"]), escape(params) or "-")
    out.print(table)
    for module, reason in info.skipped().items():
        out.print(f"[yellow]skipped[/] {module}: {escape(reason)}")
    out.print("Details: tessera ops NAME; JSON: tessera ops --json; mosaicRAG: tessera ops --format mosaic")
    return EXIT_OK


def _param_summary(name: str, p: dict[str, Any]) -> str:
    if p["required"]:
        return f"{name} (required)"
    return f"{name}={json.dumps(p['default'])}"


def _print_operator(out, item: dict[str, Any]) -> None:
    from rich.table import Table

    aliases = f"  aliases: {', '.join(item['aliases'])}" if item["aliases"] else ""
    cached = {True: "cached", False: "never cached"}.get(item["cacheable"], f"cached {item['cacheable']}")
    out.print(f"[bold cyan]{item['id']}[/] — {item['name']} ({item['category']}, scope {item['scope']}, "
              f"version {item['version']}, {cached}){aliases}")
    out.print(escape(item["description"]))
    table = Table(show_lines=False)
    for col in ("parameter", "type", "default", "allowed / bounds", "description"):
        table.add_column(col)
    for name, p in item["parameters"].items():
        kind = p["type"] + (f"[{p['items']}]" if p.get("items") else "") + (" | null" if p["nullable"] else "")
        limits = ", ".join(map(str, p["allowed"])) if p["allowed"] else ", ".join(
            f"{k} {v}" for k, v in p["bounds"].items())
        default = "(required)" if p["required"] else json.dumps(p["default"])
        table.add_row(name, escape(kind), escape(default), escape(limits), escape(p["description"]))
    out.print(table)
