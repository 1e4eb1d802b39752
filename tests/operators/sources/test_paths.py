"""operators.sources.paths: a pattern's fixed folders, the folder a source names its files from."""

from __future__ import annotations

from pathlib import Path

from operators.sources.paths import glob_stem, path_root


def test_a_patterns_fixed_folders_and_its_wildcard_part(tmp_path):
    (tmp_path / "pdfs" / "a").mkdir(parents=True)
    (tmp_path / "pdfs" / "a" / "r.pdf").write_bytes(b"")
    assert glob_stem(str(tmp_path / "pdfs" / "**" / "*.pdf")) == (tmp_path / "pdfs", ("**", "*.pdf"))
    assert glob_stem("*.csv") == (Path("."), ("*.csv",))
    assert glob_stem("../data/x.csv") == (Path("../data/x.csv"), ())  # no wildcard: the path itself
    assert glob_stem("~/docs/*.jsonl")[0] == Path.home() / "docs"
    assert path_root(str(tmp_path / "pdfs" / "**" / "*.pdf")) == tmp_path / "pdfs"
    assert path_root(str(tmp_path / "pdfs")) == tmp_path / "pdfs"  # a folder: itself
    assert path_root(str(tmp_path / "pdfs" / "a" / "r.pdf")) == tmp_path / "pdfs" / "a"  # a file: its folder
