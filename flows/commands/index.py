"""``tessera index``: inspect an index and change it in place (add, update, delete).

::

    tessera index info NAME_OR_PATH [--json] [--no-verify]
    tessera index documents NAME_OR_PATH [--offset N] [--limit N] [--json]
    tessera index add NAME_OR_PATH FILE.jsonl [--no-dense | --dense-type T] [--no-bm25] [--encoder NAME]
    tessera index update NAME_OR_PATH FILE.jsonl      # upsert by doc id
    tessera index delete NAME_OR_PATH --doc-id ID [--doc-id ID ...]
    tessera index compact NAME_OR_PATH [--max-chunks N]

NAME_OR_PATH is an index folder, or a bare name (no ``/``): the index ``$TESSERA_HOME/indices/<name>``. ``add`` creates
the index when there is none (with the given settings, and the encoder's dimension), once
its records are read, embedded and found writable. Records are BEIR JSONL:
``_id``, ``title``, ``text``; other fields become metadata columns. Each record is cut
into passages as the index's documents were (``tessera ingest``'s chunker), or is one
chunk (docno = doc id) where they were not, embedded with the index's encoder when it is dense.
``info`` checks every shard file against its sha256 and exits with status 2 naming the
damaged shards, which fail every search of the index; it also reports an unfinished ingestion
(shards committed of those planned, and the ``tessera ingest`` that resumes it). ``compact`` rewrites the live chunks
into as few shards as ``--max-chunks`` allows and drops the old shards and their tombstones
(each add, update and service upload adds a shard); it redoes the merge up to 3 times when
another commit lands meanwhile. ``add`` refuses a document whose id is live (``update``
replaces it) and a metadata column whose type conflicts with the index's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
from typing import Iterator

from flows.commands._support import (CliError, EXIT_OK, count, positive_int, print_json,
                                     refuse_contradicting_index_options, refuse_file_as_index_name, report, show_help)
from flows.commands.index_file import check_readable
from flows.commands.index_file import chunks as _chunks  # by this name: a test replaces it here


INDEX_HELP = "an index folder, or a bare name (no '/'): $TESSERA_HOME/indices/NAME"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    index = sub.add_parser("index", help="inspect or update an index in place",
                           description="List the indices (list), inspect one (info, documents) or change it in "
                                       "place (add, update, delete, compact).")
    isub = index.add_subparsers(title="actions", metavar="ACTION")
    info = isub.add_parser("info", parents=[common], help="settings, shards, counts, tombstones")
    info.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    info.add_argument("--json", action="store_true", help="print the manifest and counts as JSON")
    info.add_argument("--no-verify", action="store_true",
                      help="check only that every shard file exists, not its sha256 (faster on a large index)")
    info.set_defaults(handler=_cmd_info)
    documents = isub.add_parser("documents", parents=[common], help="its documents in the order they were added: "
                                "id, title, passages, metadata")
    documents.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    documents.add_argument("--offset", type=count, default=0, metavar="N", help="skip the first N documents")
    documents.add_argument("--limit", type=positive_int, default=20, metavar="N",
                           help="list N documents (default 20)")
    documents.add_argument("--json", action="store_true", help="print the listing as JSON")
    documents.set_defaults(handler=_cmd_documents)
    add = isub.add_parser("add", parents=[common], help="add documents (creates the index if needed)")
    add.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    add.add_argument("file", metavar="FILE.jsonl", help="BEIR JSONL records; '-' reads standard input")
    add.add_argument("--no-dense", action="store_true", help="new index: BM25 only")
    add.add_argument("--no-bm25", action="store_true", help="new index: dense only")
    add.add_argument("--dense-type", choices=("flat", "hnsw", "ivf", "ivfpq", "sq8", "hnsw_sq8"),
                     help="new index: FAISS index type (default flat)")
    add.add_argument("--encoder", default=None, help="new index: embedding model (default all-MiniLM-L6-v2); "
                     "an existing index embeds with its own")
    update = isub.add_parser("update", parents=[common], help="replace documents by doc id (upsert)")
    update.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    update.add_argument("file", metavar="FILE.jsonl", help="BEIR JSONL records; '-' reads standard input")
    for edit in (add, update):
        edit.add_argument("--encoding", metavar="NAME", help="FILE's text encoding (cp1252, latin-1...); default: "
                          "UTF-8, and for a file that is not, the one charset-normalizer guesses, named in a warning")
        edit.add_argument("--skip-bad-lines", action="store_true", help="skip (and count in a warning) lines that "
                          "are not a document, instead of refusing the whole file")
    add.set_defaults(handler=_cmd_add)
    update.set_defaults(handler=_cmd_update)
    delete = isub.add_parser("delete", parents=[common], help="delete documents by doc id")
    delete.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    delete.add_argument("--doc-id", dest="doc_ids", action="append", required=True, metavar="ID",
                        help="a document id to delete (its every chunk); repeat it for more")
    delete.set_defaults(handler=_cmd_delete)
    compact = isub.add_parser("compact", parents=[common], help="rewrite the live chunks into fewer shards, "
                              "dropping deleted chunks")
    compact.add_argument("path", metavar="NAME_OR_PATH", help=INDEX_HELP)
    compact.add_argument("--max-chunks", type=positive_int, default=100_000, metavar="N",
                         help="chunks per new shard (default 100000)")
    compact.set_defaults(handler=_cmd_compact)
    for edit in (add, update, delete, compact):
        edit.add_argument("--json", action="store_true", help="print what changed as JSON")
    for action, parser in {"info": info, "documents": documents, "add": add, "update": update, "delete": delete,
                           "compact": compact}.items():  # --index, as tessera run and ingest take it
        parser.missing_options = {"--index": f"the index is this command's first argument, with no option: tessera "
                                  f"index {action} NAME_OR_PATH ..."}
    documents.missing_options["--top"] = "--limit N lists N documents"
    from flows.commands import index_list

    index_list.register(isub, common)
    index.set_defaults(handler=lambda args: show_help(index))


def _refuse_damaged(index) -> None:
    """A shard's file missing (a deleted BM25 vocabulary, a shard folder gone): refused before adding to it, naming
    each such shard (a stat of each file, not its checksum: ``tessera index info`` reads them all). The add was
    committed before, into an index no search could read."""
    from operators.store.shard import damaged_error

    if damaged := index.check(checksums=False):
        raise damaged_error(index.path, damaged, "; nothing was added (tessera index info checks every file)")


def _open(path: str):
    """The index at ``path``; an error opening it names the argument (``field 'NAME_OR_PATH'``), as ``--index``
    names itself in the other commands."""
    from operators.store import Index, IndexStoreError

    try:
        return Index.open(path)
    except IndexStoreError as err:
        err.field = err.field or "path"
        raise



def _cmd_info(args: argparse.Namespace) -> int:
    from flows.ingestion.pending import describe as describe_ingestion
    from flows.ingestion.pending import describe_source, ingested
    from flows.ingestion.pending import unfinished as unfinished_ingestions
    from operators.store.layout import stored_format

    index = _open(args.path)
    manifest = index.manifest
    damaged = index.check(checksums=not args.no_verify)
    uncommitted = index.uncommitted()
    unfinished = unfinished_ingestions(index.path)
    on_disk = stored_format(index.path)  # "format" is this release's, an earlier one's upgraded as it was read
    if args.json:
        print_json({**manifest.model_dump(mode="json"), "stored_format": on_disk, "path": str(index.path),
                    "counts": index.counts(), "damaged": damaged, "uncommitted": uncommitted,
                    "unfinished_ingestions": unfinished, "sources": ingested(index.path)})
        return _damaged(index, damaged)
    s = manifest.settings
    counts = index.counts()
    upgrade = (f"; format {on_disk} on disk, read as {manifest.format}, which the next write stores"
               if on_disk != manifest.format else "")
    print(f"index {index.path}  (generation {manifest.generation}{upgrade})")
    print(f"  dense: {s.dense_type if s.dense else 'no'}" + (f" {s.encoder} dim={s.dim}" if s.dense else "")
          + (f" {s.dense_options}" if s.dense_options else ""))
    print("  bm25:  " + (f"{s.method} k1={s.k1} b={s.b} stemmer={s.stemmer} stopwords={s.stopwords} "
                          f"fields={s.text_fields} tokens={s.tokens}" if s.bm25 else "no"))
    # a hint where most of what is read is deleted (after syncs, updates): every search still loads those shards
    hint = (f" (most are deleted: `tessera index compact {shlex.quote(str(index.path))}` drops them)"
            if counts['tombstones'] > counts['live_chunks'] else "")
    print(f"  {counts['shards']} shard(s), {counts['chunks']} chunk(s) written, {counts['tombstones']} "
          f"tombstone(s), {counts['live_chunks']} live{hint}")
    for shard in manifest.shards:
        dead = len(manifest.tombstones.get(shard.id, []))
        dense = f" {shard.dense.factory}" + (f" (fallback: {shard.dense.fallback})" if shard.dense.fallback else "") \
            if shard.dense else ""
        problem = f"  DAMAGED: {damaged[shard.id]}" if shard.id in damaged else ""
        print(f"  - {shard.id}: {shard.n_chunks} chunks, {dead} tombstoned{dense}{problem}")
    for source in ingested(index.path):  # where a hit's relative path (science/curie.pdf) is to be opened from
        print(f"  {describe_source(source)}")
    if uncommitted:
        print(f"  {len(uncommitted)} folder(s) in shards/ that no commit records (superseded by a compaction, or "
              f"their writers died or are about to commit; a compaction removes them after an hour, the next write "
              f"a killed writer's .tmp-* folder at once): "
              f"{', '.join(uncommitted)}")
    for record in unfinished:  # a search sees only the committed part of the corpus
        print(f"  {describe_ingestion(record)}")
    return _damaged(index, damaged)


def _cmd_documents(args: argparse.Namespace) -> int:
    from rich.table import Table

    from flows.commands._support import console, escape, escape_id
    from operators.store.listing import document_page

    index = _open(args.path)
    page = document_page(index, args.offset, args.limit)
    if args.json:
        print_json({"index": str(index.path), "offset": args.offset, **page})
        return EXIT_OK
    out = console()
    if not page["total"]:  # "no document from 1 on (it holds 0)" before
        out.print(f"{escape(str(index.path))} holds no documents", soft_wrap=True)
        return EXIT_OK
    if not page["documents"]:  # a line, not an empty table under a title cut to its width
        out.print(f"{escape(str(index.path))}: no document from {args.offset + 1} on (it holds {page['total']})",
                  soft_wrap=True)
        return EXIT_OK
    out.print(f"{escape(str(index.path))}: documents {args.offset + 1}-{args.offset + len(page['documents'])} of "
              f"{page['total']}", soft_wrap=True)
    table = Table()
    for column in ("document", "title", "passages", "metadata"):
        table.add_column(column)
    for doc in page["documents"]:
        metadata = ", ".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, default=str, ensure_ascii=False)}"
                             for k, v in doc["metadata"].items())  # as --json writes it: false, not False
        table.add_row(escape_id(doc["id"]), escape(doc["title"]), str(doc["passages"]), escape(metadata))
    out.print(table)
    return EXIT_OK


def _damaged(index, damaged: dict[str, str]) -> int:
    if not damaged:
        return EXIT_OK
    from operators.store.shard import damaged_error

    raise damaged_error(index.path, damaged)


def _refuse_other_settings(index, args: argparse.Namespace) -> None:
    """The new-index options given for an existing index that has other settings: adding keeps the index's own,
    so such an option would be ignored without a word."""
    settings = index.settings
    for option, value in (("--encoder", args.encoder), ("--dense-type", args.dense_type)):
        if value and not settings.dense:  # nothing is embedded: the option was ignored, the user thought otherwise
            raise CliError(f"index {index.path} has no vectors (built with --no-dense): {option} is for an index "
                           "that embeds its documents, and adding keeps the index's own settings: drop it, or add "
                           "to a new index", field=option)
    if args.encoder and settings.dense and args.encoder != settings.encoder:
        raise CliError(f"index {index.path} embeds with {settings.encoder}, not {args.encoder}: drop --encoder "
                       "(its documents are embedded with the index's own), or add to a new index", field="--encoder")
    given = {"--no-dense": (args.no_dense and settings.dense, "dense vectors"),
             "--no-bm25": (args.no_bm25 and settings.bm25, "a BM25 index"),
             "--dense-type": (args.dense_type not in (None, settings.dense_type) and settings.dense,
                              f"a {settings.dense_type} dense index")}
    for option, (contradicts, has) in given.items():
        if contradicts:
            raise CliError(f"index {index.path} has {has}: {option} is for a new index, and adding keeps the index's "
                           "own settings: drop it, or add to a new index", field=option)


def _cmd_add(args: argparse.Namespace) -> int:
    from flows.ingestion.job_params import index_chunking
    from operators.store import Index, IndexNotFoundError, IndexSettings, resolve_index
    from operators.store.layout import check_new_index_path, check_not_foreign, new_shard_id
    from operators.store.shard import split_chunks

    refuse_contradicting_index_options(args, dense_only=("--dense-type", "--encoder"))
    refuse_file_as_index_name(args.path, "NAME_OR_PATH", "FILE")
    check_readable(args.file, args.encoding)  # before an index is created for nothing
    check_new_index_path(resolve_index(args.path))  # a file, bench's folder, a lost manifest: before any embedding
    check_not_foreign(resolve_index(args.path))  # a folder of someone's files, as `tessera ingest` refuses it
    try:
        index = _open(args.path)
    except IndexNotFoundError:
        index = None
    if index is not None:
        _refuse_other_settings(index, args)
        _refuse_damaged(index)
    settings = index.settings if index is not None else IndexSettings(
        dense=not args.no_dense, bm25=not args.no_bm25, dense_type=args.dense_type or "flat",
        encoder=args.encoder or "all-MiniLM-L6-v2")
    # an unreadable file or a missing encoder creates nothing; records are cut as the index's documents were
    cut = index_chunking(index.path) if index is not None else None
    chunks = _chunks(settings, args.file, args.skip_bad_lines, adding_to=index, cut=cut, encoding=args.encoding)
    shard_id = new_shard_id("add")
    created = index is None
    if index is None:
        if settings.dense:  # a new index has its encoder's dimension
            settings = settings.model_copy(update={"dim": chunks.column("vector").type.list_size})
        split_chunks(chunks, settings, shard_id)  # chunks the store refuses (a repeated _id) create nothing
        index = Index.create(resolve_index(args.path), settings)
    info = _added(index, chunks, shard_id)
    report(args, {"index": str(index.path), "created": created, "shard": info.id, "chunks": info.n_chunks,
                  "live": len(index), "generation": index.manifest.generation},
           f"added {info.n_chunks} chunk(s) as shard {info.id}; {len(index)} live in {index.path}")
    return EXIT_OK


def _added(index, chunks, shard_id: str):
    """``index.add``, whose refusal of ids that are live (the file's ids were checked before embedding, so another
    writer added them meanwhile) says so in this command's words, not the store's advice for every caller."""
    from operators.store import CommitError

    try:
        return index.add(chunks, shard_id=shard_id)
    except CommitError as err:
        if err.field not in ("docno", "doc_id") or "already live" not in err.detail:
            raise
        raise CliError(f"{err.detail.split(': ', 1)[1]}: another writer added them while this add ran; nothing was "
                       "written: replace them with `tessera index update`", field="FILE") from None


def _cmd_update(args: argparse.Namespace) -> int:
    from flows.commands.index_file import KEPT
    from flows.ingestion.job_params import index_chunking

    index = _open_to_update(args)
    chunks = _chunks(index.settings, args.file, args.skip_bad_lines, kept_from=str(index.path),
                     cut=index_chunking(index.path), encoding=args.encoding)
    kept = 0
    if KEPT in chunks.column_names:
        kept = chunks.column(KEPT).to_pylist().count(True)
        chunks = chunks.drop_columns([KEPT])
    commit = index.upsert(chunks)
    [info] = commit.shards
    kept_line = f" ({kept} kept their vectors: their text did not change)" if kept else ""
    report(args, {"index": str(index.path), "shard": info.id, "chunks": info.n_chunks,
                  "replaced_chunks": commit.tombstoned, "new_documents": commit.new_doc_ids, "live": len(index),
                  "kept_vectors": kept, "generation": commit.generation},
           f"wrote {info.n_chunks} chunk(s) as shard {info.id}{kept_line}, replacing {commit.tombstoned}, adding "
           f"{commit.new_doc_ids} new document(s); {len(index)} live")
    return EXIT_OK


#: How the store ends its "no index at PATH" (``layout.read_manifest``), with the ``tessera ingest`` that builds one.
_BUILD_ONE = "; build one with `tessera ingest "
_LISTED = "; `tessera index list` lists the indices there"


def _open_to_update(args: argparse.Namespace):
    """The index to update; where there is none, the error names ``tessera index add`` of the same FILE first (the
    store's advice, ``tessera ingest --source FILE``, reads a source, not a file of records such as FILE)."""
    from operators.store import IndexNotFoundError

    try:
        return _open(args.path)
    except IndexNotFoundError as err:
        if type(err) is not IndexNotFoundError or _BUILD_ONE not in err.message:
            raise
        head, tail = err.message.split(_BUILD_ONE, 1)
        path, file = shlex.quote(args.path), shlex.quote(args.file)
        raise IndexNotFoundError(f"{head}; nothing to update: make it with these documents with `tessera index add "
                                 f"{path} {file}` (or from a source with `tessera ingest --source FILE --index "
                                 f"{path}`){_LISTED if _LISTED in tail else ''}", field="path") from None


def _cmd_delete(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from operators.store.doc_id_forms import AmbiguousDocIdError, stored_doc_id

    index = _open(args.path)
    live = set(index.columns(["doc_id"])[1].column("doc_id").cast(pa.string()).to_pylist())
    try:  # an NFC id typed finds the NFD one a macOS file name gave
        args.doc_ids = [stored_doc_id(doc_id, live.__contains__) for doc_id in args.doc_ids]
    except AmbiguousDocIdError as err:
        raise CliError(err.message, field="--doc-id") from None
    if unknown := [doc_id for doc_id in dict.fromkeys(args.doc_ids) if doc_id not in live]:  # a typo among them
        from operators.store.errors import passage_hint

        raise CliError(f"no live chunk has doc id {', '.join(map(repr, unknown))}, so nothing was deleted"
                       f"{passage_hint(unknown, live)}", field="--doc-id")
    n = index.delete(doc_ids=args.doc_ids)
    report(args, {"index": str(index.path), "doc_ids": list(dict.fromkeys(args.doc_ids)), "deleted_chunks": n,
                  "live": len(index), "generation": index.manifest.generation},
           f"deleted {n} chunk(s); {len(index)} live in {index.path}")
    return EXIT_OK


def _cmd_compact(args: argparse.Namespace) -> int:
    index = _open(args.path)
    with _merge_bar(enabled=not args.json) as on_progress:
        done = index.compact(max_chunks=args.max_chunks, on_progress=on_progress)
    report(args, {"index": str(index.path), **done.as_dict(), "shards": [i.id for i in done.shards],
                  "before": {"shards": done.shards_before, "chunks": done.chunks_before,
                             "tombstones": done.tombstones_dropped,
                             "live_chunks": done.chunks_before - done.tombstones_dropped}},
           f"compacted {index.path}: {done.shards_before} shard(s) with {done.chunks_before} chunk(s), "
           f"{done.tombstones_dropped} deleted, into {done.shards_after} shard(s) with {done.chunks} chunk(s) "
           f"(generation {done.generation}, {done.seconds:.2f} s)" if done.changed else
           f"nothing to compact: {index.path} is {done.shards_after} compacted shard(s) with {done.chunks} chunk(s), "
           f"none deleted (generation {done.generation}, unchanged)")
    return EXIT_OK


@contextlib.contextmanager
def _merge_bar(*, enabled: bool) -> Iterator:
    """The shards merged so far, as a bar on stderr in ``tessera run``'s style (``_progress.stderr_bar``), gone once the
    compaction ends; none with ``--json`` or off a terminal (a log would fill with redraws): then no callback."""
    from flows.progress import redraws

    if not (enabled and redraws()):
        yield None
        return
    from flows.commands._progress import stderr_bar

    with stderr_bar("shards  {task.fields[chunks]} chunks") as bar:
        task = bar.add_task("compact", total=None, chunks=0)

        def show(event) -> None:
            again = f" (attempt {event.attempt}: the index changed)" if event.attempt > 1 else ""
            bar.update(task, description=f"compact{again}", completed=event.shards, total=event.shards_total,
                       chunks=event.chunks)
        yield show
