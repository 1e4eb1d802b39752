"""``tessera run --out LINK``: the results go to the link's target (the temporary file beside the target, renamed
over it), and the link stays a link; a link to a file not made yet makes it; a loop of links is one line before
the run. Real files and links in a temporary folder, the command in this process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = "".join(f'{{"_id": "d{i}", "text": "honey bees and opera singers {i}"}}\n' for i in range(5))


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    from flows.commands import main

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(TINY)
    spec = tmp_path / "tiny.yaml"
    spec.write_text(f"name: tiny\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {corpus}, k: 3}}}}\n")

    def run(out: Path) -> tuple[int, str]:
        monkeypatch.chdir(REPO)
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
        capsys.readouterr()
        status = main(["run", str(spec), "-q", "honey bees", "--no-cache", "--quiet", "--out", str(out)])
        return status, capsys.readouterr().err

    return run


def test_out_through_a_link_writes_its_target_and_keeps_the_link(tmp_path, tessera):
    results = tmp_path / "results"
    results.mkdir()
    target = results / "run1.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    status, err = tessera(link)
    assert status == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [json.loads(line)["qid"] for line in target.read_text().splitlines()] == ["1"] * 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left beside it
    assert sorted(p.name for p in results.iterdir()) == ["run1.jsonl"]


def test_a_link_to_a_file_not_made_yet_makes_it_and_a_loop_is_refused(tmp_path, tessera):
    link = tmp_path / "next.trec"
    link.symlink_to(tmp_path / "runs" / "next.trec")  # its folder is not there either
    status, err = tessera(link)
    assert status == 0, err
    assert link.is_symlink() and len((tmp_path / "runs" / "next.trec").read_text().splitlines()) == 3
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    status, err = tessera(loop)
    assert status == 2 and err.strip().splitlines() == [
        f"tessera: error: field '--out': cannot write --out {loop}: Too many levels of symbolic links"], err
    assert loop.is_symlink()


@pytest.mark.parametrize("out", ["results", "."])
def test_an_out_that_is_a_folder_is_named_as_a_folder_not_as_a_name_without_a_suffix(tmp_path, tessera, out):
    folder = tmp_path / "results" if out == "results" else Path(out)
    folder.mkdir(exist_ok=True)
    before = sorted(p.name for p in folder.iterdir())
    status, err = tessera(folder)
    assert status == 2 and err.strip().splitlines() == [
        f"tessera: error: field '--out': cannot write {folder}: it is a folder; give a file in it, such as "
        f"{folder / 'results.parquet'}"], err
    assert sorted(p.name for p in folder.iterdir()) == before
