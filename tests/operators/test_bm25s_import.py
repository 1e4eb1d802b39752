"""bm25s is imported without JAX (operators/bm25s_import.py): on a GPU machine JAX took 75 % of the GPU in every
process that imported bm25s. A stand-in ``jax`` package records being imported, in a fresh interpreter each."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_jax(tmp_path: Path) -> Path:
    """A ``jax`` package that writes ``imported`` when imported; its ``lax.top_k`` is what bm25s calls."""
    package = tmp_path / "site" / "jax"
    package.mkdir(parents=True)
    marker = tmp_path / "imported"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom jax import lax\n")
    (package / "lax.py").write_text("def top_k(x, k):\n    return x[:k], list(range(k))\n")
    return marker


def run(code: str, marker: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": f"{marker.parent / 'site'}:{REPO}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.process
def test_plain_bm25s_imports_the_stand_in(fake_jax: Path):
    """The control: bm25s on its own finds the stand-in and runs its top-k, so the tests below can fail."""
    assert run("import bm25s.selection as s; print(s.JAX_IS_AVAILABLE)", fake_jax) == "True"
    assert fake_jax.exists()


@pytest.mark.process
def test_writing_and_searching_a_bm25_index_never_imports_jax(fake_jax: Path, tmp_path: Path):
    """What an ingestion's write actor and a BM25 search do, in a process of their own."""
    code = ("import sys, pyarrow as pa\n"
            "from operators.store import Index, IndexSettings\n"
            f"index = Index.create({str(tmp_path / 'idx')!r}, IndexSettings(dense=False))\n"
            "index.add(pa.table({'docno': ['a', 'b'], 'doc_id': ['a', 'b'],\n"
            "                    'text': ['rivers and towns', 'mountains and snow']}))\n"
            "hits = index.search_bm25(['river towns'], k=1)\n"
            "import bm25s.selection as s\n"
            "print(s.JAX_IS_AVAILABLE, 'jax' in sys.modules, hits[0].docnos[0])")
    assert run(code, fake_jax) == "False False a"
    assert not fake_jax.exists()


@pytest.mark.process
def test_jax_stays_importable_after_bm25s(fake_jax: Path):
    code = ("from operators.bm25s_import import load_bm25s\n"
            "load_bm25s()\n"
            "import jax\n"
            "print(jax.lax.top_k([3, 2], 1)[0])")
    assert run(code, fake_jax) == "[3]"
    assert fake_jax.exists()


@pytest.mark.process
def test_a_process_that_uses_jax_keeps_it_for_bm25s(fake_jax: Path):
    code = ("import jax\n"
            "from operators.bm25s_import import load_bm25s\n"
            "print(load_bm25s().selection.JAX_IS_AVAILABLE)")
    assert run(code, fake_jax) == "True"


def test_every_bm25s_import_goes_through_load_bm25s():
    """A module that imports bm25s (or a part of it) calls ``load_bm25s`` first, and never at module level."""
    imports = re.compile(r"^(\s*)(import bm25s|from bm25s)", re.M)
    offenders = []
    for folder in ("operators", "flows", "serve", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for match in imports.finditer(text):
                before = text[:match.start()]
                if path.name == "bm25s_import.py":
                    continue
                if not match.group(1) or "load_bm25s()" not in before.rsplit("\ndef ", 1)[-1]:
                    offenders.append(f"{path.relative_to(REPO)}:{before.count(chr(10)) + 1}")
    assert offenders == []
