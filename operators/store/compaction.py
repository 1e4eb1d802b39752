"""``Index.compact``: the live chunks rewritten into few shards, redone when another commit lands meanwhile.

Compaction reads one generation, writes its live chunks as new shards, and commits them in
place of every shard of that generation only if the index is still at that generation. A
commit that lands meanwhile (an add, a delete) would otherwise be lost, so the merge is
redone on the new generation, a few times, before it gives up. Shards with no live chunk are
left out of the merge. The superseded shard folders are not deleted here: a reader that read
the old manifest a moment before may be loading them. They become folders no commit records,
which ``remove_uncommitted`` deletes after its grace period (the commit restarts their clock).

What it did is a ``CompactionSummary``, counted from the generation it merged (not from one read before or
after, which another commit may have changed): ``tessera index compact`` prints it and the service's compaction
task stores it as its result, so neither counts shards in its own words.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from operators.store.errors import CommitConflictError
from operators.store.layout import new_shard_id
from operators.store.settings import ShardInfo


@dataclass(frozen=True)
class CompactionSummary:
    """What one ``Index.compact`` did: the shards it committed, and the generation it merged them from."""

    shards: tuple[ShardInfo, ...]  # the new shards, committed in place of every shard of the merged generation
    shards_before: int
    chunks_before: int             # chunks the merged shards held, deleted ones included
    tombstones_dropped: int        # deleted chunks that are gone from disk now
    generation: int                # the generation the compaction committed
    seconds: float                 # the whole call, redone merges included

    @property
    def shards_after(self) -> int:
        return len(self.shards)

    @property
    def chunks(self) -> int:
        """Live chunks, all of them in the new shards."""
        return sum(info.n_chunks for info in self.shards)

    def as_dict(self) -> dict[str, Any]:
        """The JSON a report or a task result carries (shard ids and files left out)."""
        return {"shards_before": self.shards_before, "shards_after": self.shards_after, "chunks": self.chunks,
                "chunks_before": self.chunks_before, "tombstones_dropped": self.tombstones_dropped,
                "generation": self.generation, "seconds": self.seconds}


def compact(index, max_chunks: int, *, attempts: int) -> CompactionSummary:
    """Compact ``index`` (an ``Index``) into shards of at most ``max_chunks``; what it did."""
    started = time.perf_counter()
    for attempt in range(1, attempts + 1):
        state = index._current()
        infos: list = []
        try:  # a failed write or commit leaves none of the new shards behind
            for part in state.live_chunks(max_chunks, vectors=index.settings.dense):
                infos.append(index.write_shard(new_shard_id("compact"), part))
            done = index._commit(infos, remove_shards=[s.info.id for s in state.shards],
                                 expected_generation=state.manifest.generation)
        except CommitConflictError as err:
            index.discard(infos)
            if attempt == attempts:
                raise CommitConflictError(f"{err.message} ({attempts} attempts: the index is changed faster than "
                                          "it is compacted; compact when it is quieter)") from None
            continue
        except BaseException:
            index.discard(infos)
            raise
        index.remove_uncommitted()
        merged = state.manifest.counts()
        return CompactionSummary(shards=tuple(infos), shards_before=merged["shards"], chunks_before=merged["chunks"],
                                 tombstones_dropped=merged["tombstones"], generation=done.generation,
                                 seconds=round(time.perf_counter() - started, 3))
    raise CommitConflictError(f"compaction of {index.path} needs at least one attempt, got {attempts}")
