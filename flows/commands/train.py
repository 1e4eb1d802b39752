"""``tessera train`` / ``python -m flows.train``: fine-tune rerankers and the dense retriever (see ``flows.train``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from flows.commands._support import CliError, positive_int, whole_number
from flows.commands.job_paths import check_job_paths

DESCRIPTION = ("Train rerankers and the dense retriever on a BEIR-layout dataset's training split "
               "(qrels/SPLIT.tsv): mine hard negatives with Tessera's own retrieval, then fine-tune a "
               "cross-encoder, a bi-encoder and/or ColBERT from MiniLM into $TESSERA_HOME/models/<name>, "
               "where the hybrid_ce / hybrid_ft / hybrid_colbert flows load them. --model static distils a "
               "static embedder from MiniLM instead (no dataset needed), for hybrid_static and ingest_static.")
EPILOG = ("Example: tessera train --dataset ../shared/data/scifact --model all, then tessera bench --dataset "
          "../shared/data/scifact --flow hybrid --flow hybrid_ft --flow hybrid_ce --out bench-out. "
          "tessera train --list shows the models trained so far.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from flows.train.recipe import KINDS

    parser.add_argument("--dataset", action="append", metavar="DIR",
                        help="BEIR-layout dataset folder (repeat to train on several: each is mined on its own "
                        "index with the same --split; pseudo-queries come from the first); required unless "
                        "every --model is static")
    parser.add_argument("--split", help="qrels split to train on (default: the recipe's, train); test, dev, "
                        "validation and val are refused unless --allow-eval-split")
    parser.add_argument("--model", action="append", dest="models", metavar="KIND",
                        help=f"what to train: {', '.join(KINDS)} or all (every kind but static; repeat; default "
                        "cross-encoder)")
    parser.add_argument("--spec", default="train", metavar="RECIPE",
                        help="training recipe: a file or a built-in recipe name (default train: "
                        "flows/train/recipes/train.yaml)")
    parser.add_argument("--epochs", type=positive_int, metavar="N", help="train every model N epochs in one "
                        "schedule (default: the recipe's epochs and follow-up, if any)")
    parser.add_argument("--max-examples", type=positive_int, metavar="N",
                        help="a smoke test (with --epochs 1: its reranker can rank worse than none): mine the "
                             "first N judged queries of each dataset only and train on at most N examples, the "
                             "judged ones first (pseudo-queries fill what is left, if any)")
    parser.add_argument("--max-steps", type=positive_int, metavar="N", help="stop each model's schedule after N steps "
                        "(a recipe's follow-up, if any, runs up to N more)")
    parser.add_argument("--seed", type=whole_number, metavar="N",
                        help="seed of mining and training (default: the recipe's)")
    parser.add_argument("--output", metavar="DIR", help="folder the checkpoints go to (default "
                        "$TESSERA_HOME/models, where flows find them by name)")
    parser.add_argument("--name-prefix", default="tessera", metavar="PREFIX",
                        help="checkpoint names are PREFIX-cross-encoder, PREFIX-bi-encoder, PREFIX-colbert, "
                        "PREFIX-static (default tessera)")
    parser.add_argument("--force", action="store_true", help="retrain even when a checkpoint with the same "
                        "training config exists (a replaced checkpoint is kept as NAME-previous-KEY), and replace a "
                        "folder at a checkpoint's path that holds no training.json (refused otherwise)")
    parser.add_argument("--allow-eval-split", action="store_true",
                        help="allow --split test/dev, for training sets whose only qrels file is test.tsv "
                        "(hotpotqa_train100_hipporag, musique_train100_hipporag); never for evaluation sets")
    parser.add_argument("--index-dir", metavar="DIR",
                        help="where mining's indices live (default $TESSERA_HOME/indices/auto, shared with bench)")
    parser.add_argument("--quiet", action="store_true", help="no progress output (warnings are still shown)")
    parser.add_argument("--list", action="store_true", help="train nothing: list the models trained into --output "
                        "(default $TESSERA_HOME/models) with their kind, base, examples and when they were trained")
    parser.add_argument("--json", action="store_true", help="with --list: print JSON")


def handle(args: argparse.Namespace) -> int:
    from flows.train.recipe import TrainOptions, train
    from flows.train.resume import RESUMES_HERE

    if args.list:
        _refuse_training_options_with_list(args)
        return _list_models(args)
    if args.json:
        raise CliError("--json goes with --list (a training run prints its summary as a table)")
    datasets = args.dataset or [None]
    for dataset in datasets:
        check_job_paths(outputs={"--output": args.output, "--index-dir": args.index_dir}, inputs={"--dataset": dataset})
    options = TrainOptions(dataset=datasets[0], more_datasets=datasets[1:],
                           models=args.models or ["cross-encoder"], spec=args.spec, split=args.split,
                           epochs=args.epochs, max_examples=args.max_examples,
                           max_steps=args.max_steps, seed=args.seed, output=args.output, name_prefix=args.name_prefix,
                           force=args.force, allow_eval_split=args.allow_eval_split, index_dir=args.index_dir,
                           progress=not args.quiet)
    resumable: list[str] = []  # the kinds whose finished epochs are saved, for a Ctrl-C's last word

    def log(message: str) -> None:  # --quiet keeps the warnings, said as every command's (docs/cli.md, "For scripts")
        if message.endswith(RESUMES_HERE):
            resumable.append(message.split(":", 1)[0])
        warning = message.startswith("warning: ")
        if not args.quiet or warning:
            print(f"tessera: {message}" if warning else message, file=sys.stderr, flush=True)

    try:
        report = train(options, log=log)
    except KeyboardInterrupt:  # `tessera: interrupted` follows: say what is kept, --quiet or not
        if resumable:
            print(f"tessera: {resumable[-1]}'s finished epochs are saved: the same command resumes after them",
                  file=sys.stderr, flush=True)
        raise
    _print_summary(report)
    return 0


def _print_summary(report) -> None:
    """One row per model with what that model trained on (kinds read different examples and negatives)."""
    from rich.table import Table

    from flows.commands._support import console, escape
    from flows.train.examples import describe

    if report.mining:
        sets = report.mining.get("datasets") or [report.mining]
        where = " + ".join(f"{Path(s['dataset']).name} {s['split']}" for s in sets)
        pseudo = report.mining.get("pseudo_queries") or 0
        mined = f"{report.mining['examples']} examples" + (
            f" ({report.mining['examples'] - pseudo} judged, {pseudo} from pseudo-queries)" if pseudo else "")
        title = f"mined {mined} from {report.mining['queries']} judged queries ({where})"
    else:
        title = "distilled from the base model alone (no dataset)"
    table = Table(title=title, title_justify="left")
    for column in ("model", "kind", "trained on", "path", "status"):
        table.add_column(column, overflow="fold")  # a name cut short is no name to `mv` back
    for m in report.models:
        status = "reused" if m.reused else f"made in {m.seconds:.0f} s"
        if not m.reused and m.record.get("previous_kept_as"):  # said with --quiet too: where the replaced one went
            status += f"; the checkpoint it replaced is kept as {m.record['previous_kept_as']}"
        trained_on = describe(m.record["counts"]) if "counts" in m.record else "its base alone"
        table.add_row(escape(m.name), m.kind, trained_on, escape(str(m.path)), status)
    console().print(table)


#: The options ``--list`` reads (besides those every command has, such as ``--debug``); any other is a training run's.
LIST_OPTIONS = ("list", "json", "output", "quiet")


def _refuse_training_options_with_list(args: argparse.Namespace) -> None:
    """``--list`` with an option only a training run reads (``--list --epochs 3``, ``--list --model x``) listed the
    models and ignored it without a word: one error naming each such option given (one whose value is not its
    default)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    given = [action.option_strings[0] for action in parser._actions
             if action.dest not in LIST_OPTIONS and getattr(args, action.dest, action.default) != action.default]
    if given:
        named = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        raise CliError(f"--list trains nothing, so {named} would be ignored: leave "
                       f"{'it' if len(given) == 1 else 'them'} out, or drop --list to train", field=given[0])


def _list_models(args: argparse.Namespace) -> int:
    """``--list``: one row per checkpoint in the output folder (``checkpoints.trained_models``)."""
    from rich.table import Table

    from flows.commands._support import console, escape, print_json
    from flows.train.checkpoints import trained_models
    from operators.models import models_dir

    folder = Path(args.output).expanduser() if args.output else models_dir()
    if folder.exists() and not folder.is_dir():
        raise CliError(f"--output {folder} is a file, not a folder of trained models", field="output")
    rows = trained_models(folder)
    if args.json:
        print_json({"folder": str(folder), "models": rows})
        return 0
    if not rows:
        print(f"no model trained into {folder} yet (tessera train --dataset DIR trains one)", file=sys.stderr)
        return 0
    table = Table(title=f"trained models in {folder}", title_justify="left")
    for column in ("name", "kind", "base", "examples", "trained", "path"):
        table.add_column(column, overflow="fold")
    for row in rows:
        examples = "" if row["examples"] is None else str(row["examples"])
        if row["pseudo_examples"]:
            examples += f" ({row['judged_examples']} judged, {row['pseudo_examples']} pseudo)"
        table.add_row(escape(row["name"]), row["kind"] or "", escape(str(row["base"] or "")), examples,
                      row["trained_at"] or "", escape(row["path"]))
    console().print(table)
    return 0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("train", parents=[common], help="train rerankers / the dense retriever on a "
                                   "dataset's training split", description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    parser.set_defaults(handler=handle)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flows.train``: ``tessera train`` as a job entry point."""
    from flows.commands import standalone_main

    return standalone_main(handle, add_arguments, argv, prog="python -m flows.train", description=DESCRIPTION,
                           epilog=EPILOG)
