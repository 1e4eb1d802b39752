"""``Flow.run(cache="~/cache")``: the step cache in the home folder's ``cache``, as an index path's ``~`` is read; it
was a folder named ``~`` made in the working directory."""

from __future__ import annotations

import pytest

from operators.errors import SpecError


def test_a_cache_folder_under_the_home_folder_is_there(bm25_index, tmp_path, monkeypatch):
    from flows.api import Flow

    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.chdir(tmp_path)
    flow = Flow.load("bm25", index=bm25_index)
    flow.run("classical music", cache="~/steps")
    assert (tmp_path / "me" / "steps" / "index.sqlite").is_file() and not (tmp_path / "~").exists()
    assert flow.run("classical music", cache="~/steps").cache_hit_ratio == 1.0
    with pytest.raises(SpecError) as err:
        flow.run("classical music", cache="~nosuchuser9/steps")
    assert err.value.field == "cache" and "starts with a ~user this machine does not know" in err.value.message


def test_a_step_cache_made_in_python_reads_a_tilde_as_the_home_folder(tmp_path, monkeypatch):
    """``StepCache("~/steps")`` made a folder named ``~`` in the working directory; ``cache="~/steps"`` did not."""
    from flows.cache import StepCache

    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.chdir(tmp_path)
    assert StepCache("~/steps").root == tmp_path / "me" / "steps"
