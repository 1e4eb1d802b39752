"""``tessera cache explain FLOW --index PATH`` refuses an index that is not there as ``tessera run --index`` does
(exit 2, ``no index at PATH ...; build one with tessera ingest``): it explained the keys of a path that was a typo,
exit 0, and every step came out as never run."""

from __future__ import annotations

from tests.flows.test_cli import assert_one_line_error, tessera  # noqa: F401 - the fixture


def test_cache_explain_refuses_a_missing_index_as_run_does(tmp_path, tessera):  # noqa: F811 - the fixture
    home, missing = tmp_path / "home", tmp_path / "no-such-index"
    explain = tessera("cache", "explain", "bm25", "--index", str(missing), home=home, check=None)
    run = tessera("run", "bm25", "--index", str(missing), "-q", "bees", home=home, check=None)
    assert explain.returncode == run.returncode == 2
    said = assert_one_line_error(explain, f"no index at {missing}", "tessera ingest")
    assert said == assert_one_line_error(run, f"no index at {missing}")
    assert not missing.exists()
