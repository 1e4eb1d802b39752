"""A metadata type conflict names the shards that really hold the other type, each with its own type.

The check used to keep one (merged type, first shard) per column: after ``year`` int64 then double, a bool shard
was told the column "is double in shard <the int64 shard>", a type no shard has, in a shard that does not hold it.
"""

from __future__ import annotations

import pytest

from operators.store import Index, IndexSettings
from operators.store.errors import CommitError


def test_the_message_names_each_clashing_shard_with_its_own_type(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    ints = index.add(make_chunks(sample_docs[:3], year=[2000, 2001, 2002])).id
    floats = index.add(make_chunks(sample_docs[3:5], year=[1999.5, 2003.25])).id
    with pytest.raises(CommitError) as raised:
        index.add(make_chunks(sample_docs[5:6], year=[True]))
    message = raised.value.message
    assert f"column 'year' is bool, but it is int64 in shard {ints!r} and double in shard {floats!r} of " in message
    assert "convert the column to double" in message  # the type both shards' rows merge to
    assert len(Index.open(index.path)) == 5


def test_a_shard_whose_type_merges_with_the_new_one_is_not_named(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(make_chunks(sample_docs[:2], year=[None, None]))  # a null-typed column merges with any type
    ints = index.add(make_chunks(sample_docs[2:4], year=[2000, 2001])).id
    with pytest.raises(CommitError) as raised:
        index.add(make_chunks(sample_docs[4:5], year=["late"]))
    assert f"column 'year' is string, but it is int64 in shard {ints!r} of " in raised.value.message
    assert raised.value.message.count("in shard") == 1
