"""An index folder removed (or moved) while a write into it runs is said in one line naming the index, not as
numpy's or pyarrow's bare ``FileNotFoundError`` for a file in a temporary folder (``tessera: internal error``)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from operators.store import Index, IndexSettings
from operators.store.disk import refused_by_disk
from operators.store.errors import IndexNotFoundError


def test_a_write_into_an_index_removed_meanwhile_names_the_index(tmp_path):
    path = tmp_path / "idx"
    Index.create(path, IndexSettings(dense=False))
    shutil.rmtree(path)
    with pytest.raises(IndexNotFoundError, match=f"index {path} was removed or moved while this ran \\(writing shard "
                                                 "'s1'\\): nothing more was written there"):
        with refused_by_disk(path, "writing shard 's1'"):
            np.save(path / "shards" / ".tmp-s1" / "bm25_doclen.npy", np.zeros(3))


def test_a_missing_file_of_an_index_that_is_there_is_not_taken_for_a_removed_index(tmp_path):
    path = tmp_path / "idx"
    Index.create(path, IndexSettings(dense=False))
    with pytest.raises(FileNotFoundError):
        with refused_by_disk(path, "writing shard 's1'"):
            np.save(path / "shards" / ".tmp-s1" / "bm25_doclen.npy", np.zeros(3))
