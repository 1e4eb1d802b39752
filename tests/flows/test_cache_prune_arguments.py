"""``StepCache.prune``'s arguments from Python: a size string is read as the CLI reads ``--max-size``, and a bound
it cannot use (a duration string, a negative number, none at all) is a ``CacheError`` naming the argument, as
``tessera cache prune`` refuses it, not a ``TypeError`` from a comparison or a prune that silently removes nothing."""

from __future__ import annotations

import os

import pytest

from flows.cache import CacheError, StepCache


@pytest.fixture
def filled(bm25_index, tmp_path, monkeypatch):
    """A cache holding one stored file for each of two queries."""
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    flow = Flow.load("bm25", index=bm25_index)
    root = tmp_path / "cache"
    for query in ("gothic cathedrals", "classical music"):
        flow.run(query, cache=root)
    return root


def test_a_size_string_is_read_as_the_cli_reads_max_size(filled):
    assert len(os.listdir(filled / "data")) == 2
    assert StepCache(filled).prune(max_bytes="1M")["files"] == 0  # both fit in a MiB
    done = StepCache(filled).prune(max_bytes="0K")
    assert done["files"] == 2 and done["bytes_left"] == 0
    assert os.listdir(filled / "data") == []


@pytest.mark.parametrize("kwargs, field, says", [
    ({"max_bytes": "2 gigs"}, "max_bytes", "'2 gigs' is not a size"),
    ({"max_bytes": -1}, "max_bytes", "takes a number of bytes"),
    ({"max_bytes": 1.5}, "max_bytes", "got 1.5"),
    ({"max_bytes": True}, "max_bytes", "got True"),
    ({"older_than_s": "30d"}, "older_than_s", "takes a number of seconds"),
    ({"older_than_s": -5}, "older_than_s", "got -5"),
    ({"older_than_s": float("nan")}, "older_than_s", "got nan"),
    ({}, "max_bytes", "give max_bytes (bytes, or a size such as '2G'), older_than_s (seconds) or both"),
])
def test_a_bound_prune_cannot_use_is_refused_naming_it(filled, tmp_path, kwargs, field, says):
    for root in (filled, tmp_path / "no-cache-here"):  # refused alike where no cache is yet
        with pytest.raises(CacheError) as err:
            StepCache(root).prune(**kwargs)
        assert err.value.field == field and says in err.value.message
    assert len(os.listdir(filled / "data")) == 2  # nothing was removed
