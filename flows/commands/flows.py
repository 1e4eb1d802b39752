"""``tessera flows list | show NAME | save NAME FILE | delete NAME``: built-in and saved flows."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flows.commands._support import (EXIT_OK, SPEC_ARGUMENT, CliError, console, escape, print_json, report,
                                     say_reading_the_terminal, show_help)
from operators.errors import TesseraError


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    flows = sub.add_parser("flows", help="built-in and saved flows",
                           description="Built-in flows (flows/specs/*.yaml), saved flows "
                           "($TESSERA_HOME/flows/NAME.yaml, default ~/.tessera) and training recipes "
                           "(flows/train/recipes/*.yaml).")
    fsub = flows.add_subparsers(title="actions", metavar="ACTION")
    f_list = fsub.add_parser("list", parents=[common], help="list built-in and saved flows")
    f_list.add_argument("--json", action="store_true", help="print JSON")
    f_list.set_defaults(handler=_cmd_flows_list)
    f_show = fsub.add_parser("show", parents=[common], help="print a flow's spec")
    f_show.add_argument("name", metavar="NAME", help="built-in or saved flow name, or a spec file")
    f_show.add_argument("--json", action="store_true", help="print the validated spec as JSON")
    f_show.set_defaults(handler=_cmd_flows_show)
    f_save = fsub.add_parser("save", parents=[common], help="validate a spec and save it by name")
    f_save.add_argument("name", metavar="NAME")
    f_save.add_argument("file", metavar="FILE", help="spec file (YAML or JSON; '-' reads stdin)")
    f_save.add_argument("--force", action="store_true", help="replace a saved flow of that name (refused without it "
                        "when the spec differs)")
    f_save.add_argument("--json", action="store_true", help="print the name, path and whether a flow was replaced "
                        "as JSON")
    f_save.set_defaults(handler=_cmd_flows_save, **{SPEC_ARGUMENT: "file"})  # a spec's error is FILE's, not NAME's
    f_delete = fsub.add_parser("delete", parents=[common], help="delete a saved flow")
    f_delete.add_argument("name", metavar="NAME")
    f_delete.add_argument("--json", action="store_true", help="print the name and path as JSON")
    f_delete.set_defaults(handler=_cmd_flows_delete)
    flows.set_defaults(handler=lambda args: show_help(flows))


def _cmd_flows_list(args: argparse.Namespace) -> int:
    from flows import store
    from flows.spec import FlowSpec
    from flows.train.recipe import load_recipe, recipe_names, recipe_path

    listed = [("built-in", name, store.builtin_path(name)) for name in store.builtin_names()]
    listed += [("saved", name, store.saved_path(name)) for name in store.saved_names()]
    listed += [("recipe", name, recipe_path(name)) for name in recipe_names()]
    entries = []
    for kind, name, path in listed:
        entry = {"name": name, "kind": kind, "path": str(path)}
        try:
            spec = load_recipe(path)[0] if kind == "recipe" else FlowSpec.load(path)  # a recipe: its mining flow
            if kind == "saved":  # its steps' params checked as a run checks them: one an earlier release took and
                spec.build()     # this one refuses (a negative fusion weight) was listed as runnable
            entry.update(description=spec.description, steps=[f"{s}: {st.op}" for s, st in spec.steps.items()])
        except TesseraError as err:
            entry.update(description="", steps=[], error=str(err))
        entries.append(entry)
    if args.json:
        print_json(entries)
        return EXIT_OK
    from rich.table import Table

    out = console()
    if not entries:
        out.print("no flows")
        return EXIT_OK
    table = Table(title="flows", title_justify="left", title_style="bold")
    for col in ("name", "kind", "steps", "description"):
        table.add_column(col)
    for e in entries:
        table.add_row(escape(e["name"]), e["kind"], " → ".join(s.split(": ", 1)[1] for s in e["steps"]) or "-",
                      escape(e.get("error") or e["description"]))
    out.print(table)
    folder = store.flows_dir()
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():  # no flow was saved there, nor can be: said, not named a folder
        print(f"tessera flows list: warning: saved flows live in {folder}, but {blocker} is a file: none can be "
              "saved until it is moved away", file=sys.stderr)
    else:
        out.print(f"saved flows live in {escape(str(folder))}")
    return EXIT_OK


def _cmd_flows_show(args: argparse.Namespace) -> int:
    from flows.spec import FlowSpec
    from flows.specfile import read_mapping, read_text, resolve_spec_path
    from flows.train.recipe import recipe_names, recipe_path

    recipe = resolve_spec_path(args.name) is None and args.name in recipe_names()  # listed by `flows list`
    path = recipe_path(args.name) if recipe else resolve_spec_path(args.name)
    if path is None:
        FlowSpec.load(args.name)  # raises the error that lists the known flows
    if args.json and recipe:
        print_json(read_mapping(path)[0])
    elif args.json:
        spec = FlowSpec.load(path)
        spec.build()  # validated, as the help says: a cycle or a misspelt param is refused as `tessera run` does
        print_json(spec.to_dict())
    elif path.suffix.lower() == ".json":  # stdout stays JSON (`| jq .`): where it came from goes to stderr
        text = read_text(path)
        print(f"# {path}", file=sys.stderr)
        sys.stdout.write(text)
    else:  # a YAML comment: the output is still the spec's YAML
        sys.stdout.write(f"# {path}\n{read_text(path)}")
    return EXIT_OK


def _cmd_flows_save(args: argparse.Namespace) -> int:
    from flows import store
    from flows.spec import FlowSpec
    from flows.specfile import load_yaml

    if args.file == "-":  # the spec's text, read as YAML or JSON: never a flow's name or a file's path, which a
        # line without its newline (`printf 'steps: ...'`, `echo -n hybrid`) was taken for; nothing at all is empty
        say_reading_the_terminal("the spec (YAML or JSON)")
        spec = FlowSpec.parse(load_yaml(sys.stdin.read()))
    else:
        source = Path(args.file)
        if source.is_dir():  # said as `tessera run` says it, not "not found" of a folder that is there
            raise CliError(f"'{args.file}' is a folder, not a spec file: give the YAML or JSON file in it",
                           field="file")
        if not source.is_file():
            raise CliError(f"spec file not found: {args.file}", field="file")
        spec = FlowSpec.load(source)
    path, replaced = store.save_kept(args.name, spec, force=args.force)
    report(args, {"name": args.name, "path": str(path), "replaced": replaced},
           f"{'replaced' if replaced else 'saved'} flow '{args.name}' {'at' if replaced else 'to'} {path}")
    return EXIT_OK


def _cmd_flows_delete(args: argparse.Namespace) -> int:
    from flows import store

    path = store.delete(args.name)
    report(args, {"name": args.name, "path": str(path)}, f"deleted flow '{args.name}' ({path})")
    return EXIT_OK
