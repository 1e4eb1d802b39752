"""What ``tessera ingest --sync`` costs against building the index again, for edits at three places of a folder.

A folder of Markdown files (one SciFact abstract each, real passages) is ingested with the default ingest flow
(MiniLM passages, BM25 and FAISS), in-process. Then, one after the other, each followed by a sync: the last file
edited, a file in the middle edited, the first file removed. After each sync the same folder is ingested into a new
index (what a user without ``--sync`` would do), and the two indices must hold the same documents with the same
texts and vectors. The figures are wall seconds of each, side by side, and the sync/rebuild ratio; the shards a
sync keeps are not read again, and in those it writes again only the changed text meets the encoder (the others'
vectors come from the index), so the cost of the rest is reading, chunking and writing.

::

    python benchmarks/ingest_sync.py                  # 2,000 files, shards of 250
    python benchmarks/ingest_sync.py --files 1000 --shard-size 100

The folder and the indices go to a temporary folder (``--work-dir`` to keep them).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SCIFACT, read_beir_corpus  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def write_folder(folder: Path, files: int) -> list[Path]:
    ids, titles, texts = read_beir_corpus(SCIFACT, limit=files)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (title, text) in enumerate(zip(titles, texts)):
        path = folder / f"{i:05d}.md"
        path.write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
        paths.append(path)
    return paths


def timed_ingest(folder: Path, index: Path, shard_size: int, **options) -> tuple[float, dict]:
    from flows.ingestion import ingest

    started = time.perf_counter()
    report = ingest(str(folder), index, shard_size=shard_size, executor="local", progress=False, spec="ingest",
                    **options)
    return time.perf_counter() - started, report.to_dict()


def documents(index: Path) -> dict[str, str]:
    from operators.store import Index

    table = Index.open(index).columns(["docno", "text"])[1]
    return dict(zip(table.column("docno").to_pylist(), table.column("text").to_pylist()))


def vectors(index: Path) -> dict[str, object]:
    from operators.store import Index
    from operators.store.shard import live_vectors

    return live_vectors(index / "shards", Index.open(index).manifest)


def same_index(one: Path, other: Path) -> bool:
    """The same documents with the same texts, and vectors equal but for float rounding (batching)."""
    if documents(one) != documents(other):
        return False
    a, b = vectors(one), vectors(other)
    return a.keys() == b.keys() and all(float(abs(a[k] - b[k]).max()) < 1e-4 for k in a)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--shard-size", type=int, default=250)
    parser.add_argument("--work-dir", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="tessera-sync-"))
    folder, index = work / "notes", work / "synced"
    paths = write_folder(folder, args.files)
    seconds, report = timed_ingest(folder, index, args.shard_size)
    print(f"first ingest: {args.files} files, {report['chunks']} passages, {seconds:.1f} s")
    edits = [("last file edited", lambda: paths[-1].write_text("# Edited\n\nA new last note.\n", encoding="utf-8")),
             ("middle file edited", lambda: paths[len(paths) // 2].write_text("# Edited\n\nA new middle note.\n",
                                                                   encoding="utf-8")),
             ("first file removed", lambda: paths[0].unlink())]
    rows = []
    for i, (what, edit) in enumerate(edits):
        edit()
        synced, sync_report = timed_ingest(folder, index, args.shard_size, sync=True)
        rebuilt, _ = timed_ingest(folder, work / f"rebuilt{i}", args.shard_size)
        same = same_index(index, work / f"rebuilt{i}")
        r = sync_report
        rows.append({"edit": what, "sync_s": round(synced, 1), "rebuild_s": round(rebuilt, 1),
                     "ratio": round(synced / rebuilt, 2), "docs_written_again": r["docs"],
                     "chunks_embedded": r["chunks_embedded"], "chunks_reused": r["chunks_reused"],
                     "docs_deleted": r["docs_deleted"], "same_index": same})
        print(f"{what}: sync {synced:.1f} s ({r['docs']} documents written again, {r['chunks_embedded']} passages "
              f"encoded, {r['chunks_reused']} kept, {r['docs_deleted']} deleted), rebuild {rebuilt:.1f} s, ratio "
              f"{synced / rebuilt:.2f}, same documents and vectors: {same}")
    print(json.dumps(rows))
    return 0 if all(r["same_index"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
