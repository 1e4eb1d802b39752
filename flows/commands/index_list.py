"""``tessera index list``: the indices under ``$TESSERA_HOME/indices``, each with its counts or what is wrong with it.

A user told ``no index at ...`` had no command to see which names exist (``tessera index list`` was an "invalid
choice"), nor which of them an interrupted ingest, a lost or damaged manifest left unusable. Each folder is read as
``tessera index info`` reads it, less the shard files' checksums (``index info NAME`` checks those): the manifest
alone, so a listing of many large indices takes no time. One that cannot be opened is a line with the reason, and
the listing goes on.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from flows.commands._support import EXIT_OK, print_json


def register(isub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    listing = isub.add_parser("list", parents=[common], help="the indices under $TESSERA_HOME/indices, with their "
                              "counts or what is wrong with each")
    listing.add_argument("--json", action="store_true", help="print the listing as JSON")
    listing.set_defaults(handler=_cmd_list)


def entries(folder: Path) -> list[dict[str, Any]]:
    """One record per folder in ``folder``, by name: ``name``, ``path``, and ``shards``, ``live_chunks`` and
    ``unfinished`` (an ingestion whose shards are not all committed) for an index, or ``error`` (one line)."""
    from flows.ingestion.first_ingest import with_resume
    from flows.ingestion.pending import has_staged
    from operators.store.layout import BENCH_FOLDER, read_manifest
    from operators.store.errors import IndexStoreError

    found = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        record: dict[str, Any] = {"name": path.name, "path": str(path)}
        if path.name == BENCH_FOLDER:
            record["error"] = "the folder tessera bench builds its indices in, not an index"
        else:
            try:
                counts = read_manifest(path).counts()
                record.update(shards=counts["shards"], live_chunks=counts["live_chunks"],
                              unfinished=has_staged(path))
            except IndexStoreError as err:
                record["error"] = str(with_resume(err))
            except OSError as err:  # a folder this user cannot read
                record["error"] = f"cannot read it: {err.strerror or err}"
        found.append(record)
    return found


def _cmd_list(args: argparse.Namespace) -> int:
    from operators.home import tessera_home
    from operators.errors import one_line

    folder = tessera_home() / "indices"
    found = entries(folder)
    if args.json:
        print_json({"folder": str(folder), "indices": found})
        return EXIT_OK
    if not found:
        print(f"no index in {folder} (tessera ingest --source FILE --index NAME makes one)")
        return EXIT_OK
    width = max(len(record["name"]) for record in found)
    for record in found:
        if "error" in record:
            said = f"not usable: {one_line(record['error'])}"
        else:
            said = f"{record['shards']} shard(s), {record['live_chunks']} live chunk(s)" + \
                ("; an ingestion is unfinished (tessera index info NAME says how to resume it)"
                 if record["unfinished"] else "")
        print(f"{record['name']:<{width}}  {said}")
    return EXIT_OK
