"""``Index.compact``: the live chunks rewritten into few shards, redone when another commit lands meanwhile.

Compaction reads one generation, writes its live chunks as new shards, and commits them in
place of every shard of that generation only if the index is still at that generation. A
commit that lands meanwhile (an add, a delete) would otherwise be lost, so the merge is
redone on the new generation, a few times, before it gives up. Shards with no live chunk are
left out of the merge. The superseded shard folders are not deleted here: a reader that read
the old manifest a moment before may be loading them. They become folders no commit records,
which ``remove_uncommitted`` deletes after its grace period (the commit restarts their clock).
"""

from __future__ import annotations

from operators.store.errors import CommitConflictError
from operators.store.layout import new_shard_id


def compact(index, max_chunks: int, *, attempts: int) -> list:
    """Compact ``index`` (an ``Index``) into shards of at most ``max_chunks``; returns the new ShardInfos."""
    for attempt in range(1, attempts + 1):
        state = index._current()
        infos: list = []
        try:  # a failed write or commit leaves none of the new shards behind
            for part in state.live_chunks(max_chunks, vectors=index.settings.dense):
                infos.append(index.write_shard(new_shard_id("compact"), part))
            index._commit(infos, remove_shards=[s.info.id for s in state.shards],
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
        return infos
    raise CommitConflictError(f"compaction of {index.path} needs at least one attempt, got {attempts}")
