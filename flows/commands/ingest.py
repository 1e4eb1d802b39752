"""``tessera ingest``: read -> chunk -> embed -> write a corpus into an index directory (resumable).

::

    tessera ingest --source data/sample/corpus.jsonl --index idx [--spec ingest] [--shard-size N]
                   [--dense-type hnsw] [--no-dense] [--no-bm25] [--no-chunk] [--executor local|ray]
                   [--retry-failed] [--replace] [--sync] [--encoding NAME] [--text-field F] [--id-field F]
                   [--title-field F] [--colbert MODEL] [--json] [--quiet]

Running the same command again after a crash or a Ctrl-C finishes the job; see ``flows.ingestion``.
An index with vectors gets its encoder's ONNX export at the end (unless ``TESSERA_QUERY_ENCODER=torch``), so
its first dense query is fast (``operators.models.onnx_query_encoder.export_after_ingest``).
A Ctrl-C stops it within one encoder call, a second one at once (``ingest_interrupt``).
In-process by default, as ``tessera run`` and ``flows.api.ingest``: on one machine Ray Data adds its start and a
process per stage and gains nothing (docs/results.md, "Ingestion at the card's scale"). ``python -m flows.ingest`` is
this command with ``--executor ray`` by default, for ``ray job submit`` on a cluster.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Sequence

from flows import uris
from flows.commands._support import (EXIT_CANCELLED, EXIT_INTERNAL, EXIT_OK, CliError, cli_option_error,
                                     cli_option_logs, console, positive_int, print_json,
                                     refuse_contradicting_index_options, refuse_file_as_index_name)
from flows.commands.ingest_interrupt import StopOnInterrupt, typed_command
from flows.commands.job_paths import check_job_paths

#: The ingestion's parameters that its errors and warnings name as a Python call passes them (``source='x'``,
#: ``retry_failed=True``), and the options that this command names them by (``--source 'x'``, ``--retry-failed``):
#: the one place the two are mapped (``cli_option_error``, ``cli_option_logs``).
OPTIONS = {"source": "--source", "spec": "--spec", "shard_size": "--shard-size", "colbert": "--colbert",
           "retry_failed": "--retry-failed", "replace": "--replace", "sync": "--sync", "encoding": "--encoding",
           "text_field": "--text-field", "id_field": "--id-field", "title_field": "--title-field"}


def add_arguments(parser: argparse.ArgumentParser, *, default_executor: str) -> None:
    from flows.ingestion import DEFAULT_SHARD_SIZE, DEFAULT_SPEC

    parser.add_argument("--source", "-s", metavar="PATH", help=_source_help())
    parser.add_argument("--index", "-i", required=True, metavar="NAME_OR_PATH",
                        help="index directory (created if needed) or an index name under $TESSERA_HOME/indices")
    parser.add_argument("--spec", default=DEFAULT_SPEC, metavar="SPEC",
                        help=f"ingest flow spec: file or built-in name (default: {DEFAULT_SPEC}, "
                        "flows/specs/ingest.yaml)")
    parser.add_argument("--shard-size", type=positive_int, default=None, metavar="N",
                        help=f"documents per shard of a new source (default {DEFAULT_SHARD_SIZE}); a source "
                             "ingested before keeps its own")
    parser.add_argument("--dense-type", choices=("flat", "hnsw", "ivf", "ivfpq", "sq8", "hnsw_sq8"),
                        help="FAISS index type of each shard (a new index only)")
    parser.add_argument("--no-dense", action="store_true", help="BM25 only: no encoder, no vectors")
    parser.add_argument("--no-bm25", action="store_true", help="dense only: no BM25 statistics")
    parser.add_argument("--no-chunk", action="store_true", help="one chunk per document (docno = source id)")
    parser.add_argument("--executor", choices=("ray", "local"), default=default_executor,
                        help=f"where shards are processed (default: {default_executor}); local: in-process")
    parser.add_argument("--retry-failed", action="store_true",
                        help="process only the documents in the index's failure ledger (failures.jsonl)")
    parser.add_argument("--replace", action="store_true",
                        help="a document whose id is in the index already replaces it (default: refused)")
    parser.add_argument("--sync", action="store_true",
                        help="follow a source whose ingested files were edited or removed since: their documents are "
                        "ingested again, and those the source no longer has deleted (default: refused)")
    parser.add_argument("--encoding", metavar="NAME",
                        help="the source files' text encoding (cp1252, latin-1, shift_jis...) for JSONL, CSV/TSV, "
                        "text, Markdown and HTML files; default: UTF-8, and a file that is not is read in the "
                        "encoding charset-normalizer guesses, named in a warning")
    for what, default in (("text", "text"), ("id", "_id, then docno, id, doc_id"), ("title", "title")):
        parser.add_argument(f"--{what}-field", metavar="FIELD",
                            help=f"the records' field (a CSV/TSV or Parquet column, a JSONL key) that holds the "
                            f"documents' {what} (default: {default})")
    parser.add_argument("--colbert", metavar="MODEL",
                        help="after ingesting, precompute the document tokens of this ColBERT model (a name "
                        "trained by tessera train, or a checkpoint folder) for rerank.colbert")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bars nor notes (warnings still)")


#: ``tessera ingest --help``'s examples (tests/flows/test_cli_parsing.py parses each): make demo's, a folder of files.
EXAMPLES = ("tessera ingest --source data/sample/corpus.jsonl --index .tessera/indices/sample --shard-size 250",
            "tessera ingest --source notes/ --index notes")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("ingest", parents=[common], help="ingest a corpus into an index (resumable)",
                            description=handle.__doc__, epilog="Examples: " + "; ".join(EXAMPLES))
    add_arguments(parser, default_executor="local")
    parser.loose_values = "--source"
    in_spec = ("set by the ingest spec: --spec ingest_static embeds with the static model, and a spec file of your "
               "own (a copy of flows/specs/ingest.yaml) sets any model, chunk size or overlap")
    parser.missing_options = dict.fromkeys(("--model", "--embedder", "--encoder", "--chunk-size", "--overlap"),
                                           f"the encoder and the chunking are {in_spec}")
    parser.set_defaults(handler=handle)


def _source_help() -> str:
    """``--source``'s help, every suffix it reads named from ``plan.FORMATS`` (it named no ``.pq``, ``.markdown``,
    ``.htm`` nor ``.jsonl.gz``, which it reads)."""
    from flows.ingestion.plan import DOCUMENT_FORMATS, FORMATS

    def kinds(documents: bool) -> str:
        return ", ".join(f"{label} ({' '.join(suffixes)})" for label, suffixes, _, _ in FORMATS
                         if (label in DOCUMENT_FORMATS) == documents)

    return (f"the corpus, read by its suffix: records, a document each, of {kinds(False)}, with BEIR's fields "
            f"_id, title, text, or a BEIR folder (corpus.jsonl); or document files, {kinds(True)}: a PDF's page or "
            "another file a document each. A file, a glob, or a folder of one record format or of document files "
            "mixed (its own files: 'DIR/**/*' reads its subfolders too); default: the spec's read step")


def _matches_a_file(pattern: str) -> bool:
    """Whether the glob names a file, as the read step expands it (``~``, ``**``, link loops not gone round)."""
    from operators.sources.link_loops import safe_glob

    return any(os.path.isfile(path) for path in safe_glob(os.path.expanduser(pattern)))


def handle(args: argparse.Namespace) -> int:
    """Read, chunk, embed and write a corpus into a sharded index; run it again to resume after a crash."""
    from flows.ingestion import ingest
    from flows.ingestion.errors import IngestError
    from flows.ingestion.report import NOTHING_TO_DO
    from flows.model_check import MissingModelsError

    refuse_contradicting_index_options(args, dense_only=("--dense-type",))
    local = uris.file_uri_path(args.source) if uris.is_uri(args.source) else args.source
    glob = args.source is not None and any(ch in args.source for ch in "*?[") and not os.path.lexists(
        os.path.expanduser(local or ""))  # a file named 'docs [v2].jsonl' is that file
    if glob and uris.is_uri(args.source):  # read as a file of that name, it said "no file matches"
        raise CliError(f"--source '{args.source}': a URI names one file or folder, not a glob; give the folder "
                       f"({args.source.rsplit('/', 1)[0]}/), or the glob as a local path", field="--source")
    if glob and not _matches_a_file(args.source):  # the read step named 'params.path'
        from operators.sources.paths import denied

        why = denied(args.source) or f"no file matches it (working directory {os.getcwd()})"  # not "no file" alone
        raise CliError(f"cannot read --source '{args.source}': {why}", field="--source")
    check_job_paths(outputs={"--index": args.index}, inputs={"--source": None if glob else args.source},
                    executor=args.executor)
    overrides = {}
    if args.dense_type:
        overrides["dense_type"] = args.dense_type
    if args.no_dense:
        overrides["dense"] = False
    if args.no_bm25:
        overrides["bm25"] = False
    refuse_file_as_index_name(args.index, "--index", "--source")
    index = uris.local_path(args.index, "index")
    interrupts = StopOnInterrupt(resume=_resume_command(args))
    try:
        with interrupts, cli_option_logs("tessera.ingest", OPTIONS), \
                uris.local_input(None if glob else args.source, "source") as source:
            report = ingest(args.source if glob else source, index, settings=overrides or None,
                            shard_size=args.shard_size, executor=args.executor,
                            chunk=False if args.no_chunk else None, spec=args.spec, progress=not args.quiet,
                            retry_failed=args.retry_failed, colbert=args.colbert, replace=args.replace,
                            encoding=args.encoding, fields=_fields(args), sync=args.sync)
    except KeyboardInterrupt:  # the shards committed so far stay: the same command resumes
        interrupts.announce()
        return EXIT_CANCELLED
    except MissingModelsError as err:  # with the command that makes each (ingest_static's tessera-static)
        from flows.train import train_command

        raise cli_option_error(err.made_by(train_command), OPTIONS) from None
    except IngestError as err:  # named as the user typed it: --source, not source=
        raise cli_option_error(err, OPTIONS) from None
    nothing = report.nothing_ingested
    if report.shards_total == 0 and not args.retry_failed:  # not a rerun with nothing new: it has the source's shards
        source = f"--source {args.source}" if args.source else f"the read step of --spec {args.spec}"
        print(f"tessera: warning: {source} holds no documents (an empty file, a header line alone, PDF pages "
              f"without a text layer?): nothing was ingested into {report.index}", file=sys.stderr, flush=True)
    if args.replace and report.shards_total and report.shards_skipped == report.shards_total:  # a resume's no-op
        print(f"tessera: warning: nothing was replaced: every shard of this source was committed to {report.index} "
              "before, so the run found nothing to do; to replace the index's copies with these documents: "
              f"tessera index update {shlex.quote(str(report.index))} FILE.jsonl", file=sys.stderr, flush=True)
    try:
        prepared = None if nothing else _prepare_query_encoder(report.index)
    except KeyboardInterrupt:  # run_handler says interrupted (or terminated) with the status
        print(f"tessera: {report.index} is complete; the query encoder was not prepared (the first dense query "
              "prepares it)", file=sys.stderr, flush=True)
        raise
    if args.json:
        print_json({**report.to_dict(), "query_encoder_export": prepared and prepared[2]})
        return EXIT_INTERNAL if nothing else EXIT_OK
    out = console()
    r = report
    elsewhere = f", {r.shards_elsewhere} of them by another ingest meanwhile" if r.shards_elsewhere else ""
    rate = f"{r.docs_per_s:.0f}" if r.docs_per_s >= 10 else f"{r.docs_per_s:.2f}"
    out.print(f"[bold]{r.index}[/]: {r.docs} docs -> {r.chunks} chunks in {r.shards_written} shard(s) "
              f"({r.shards_skipped} already done{elsewhere}), {r.seconds:.1f} s, {rate} docs/s",
              soft_wrap=True)  # one line whatever the width: scripts grep it
    if args.retry_failed and not r.docs_total:
        out.print(f"nothing to retry: {r.index} has no open failures", soft_wrap=True)
    elif r.nothing_to_do and not args.replace:
        out.print(NOTHING_TO_DO, soft_wrap=True)
    if r.chunks_reused:
        out.print(f"kept: the vectors of {r.chunks_reused} passage(s) whose text did not change "
                  f"({r.chunks_embedded} embedded)")
    if r.docs_deleted:
        out.print(f"deleted: {r.docs_deleted} document(s) the source no longer has")
    if r.colbert_store:
        out.print(f"ColBERT tokens: {r.colbert_store}")
    if prepared:
        encoder, seconds, _ = prepared
        out.print(f"query encoder: exported '{encoder}' to ONNX ({seconds:.1f} s, once): dense queries skip torch")
    if r.resolved:
        out.print(f"retried: {r.resolved} failure(s) now in the index")
    if r.closed:
        out.print(f"closed: {r.closed} failure(s) of files no longer there")
    retry = f"fix them, then: tessera ingest --index {shlex.quote(r.index)} --retry-failed"
    if nothing:  # an error, where scripts and terminals look for one, its command on one line to paste
        from flows.ingestion.errors import NothingIngestedError

        again = "this command again with --text-field COLUMN"
        print(f"tessera: error: {NothingIngestedError(r, retry, again).message}", file=sys.stderr, flush=True)
        return EXIT_INTERNAL
    if r.failures or r.open_failures:
        out.print(f"[yellow]{r.failures} document(s) failed in this run; {r.open_failures} open in "
                  f"{r.index}/failures.jsonl[/] ({retry})", soft_wrap=True)
    return EXIT_OK


def _resume_command(args: argparse.Namespace) -> str | None:
    """The command line as typed, which resumes an interrupted run (``typed_command``)."""
    from operators.store.layout import is_index_name

    return typed_command(args, [args.source, None if is_index_name(args.index) else args.index])


def _fields(args: argparse.Namespace) -> dict[str, str] | None:
    """``--text-field`` and the others given, as ``ingest``'s ``fields``."""
    from flows.ingestion.plan import READ_FIELDS

    given = {name: getattr(args, name) for name in READ_FIELDS if getattr(args, name) is not None}
    return given or None


def _prepare_query_encoder(index: str) -> tuple[str, float, str] | None:
    """The torch-free query encoder's export for the index's encoder, made now (``export_after_ingest``):
    (encoder, seconds, export file), or None when nothing was made."""
    import time

    from operators.models.onnx_query_encoder import export_after_ingest

    started = time.perf_counter()
    made = export_after_ingest(index)
    return None if made is None else (made[0], time.perf_counter() - started, str(made[1]))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flows.ingest``: ``tessera ingest`` with the Ray executor by default (cluster jobs)."""
    from flows.commands import standalone_main

    return standalone_main(handle, lambda parser: add_arguments(parser, default_executor="ray"), argv,
                           prog="python -m flows.ingest", description=handle.__doc__)
