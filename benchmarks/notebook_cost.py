"""What each notebook costs when executed as the tests execute it: nbclient, a fresh kernel of this Python, run from
notebooks/, writing under a temporary $TESSERA_NOTEBOOK_DIR. Prints wall seconds and the kernel's CPU seconds
(wall/CPU above 1 means the machine was busy). Goal: each notebook under a minute; quickstart cheap enough for
``make test``.

    .venv/bin/python benchmarks/notebook_cost.py [quickstart benchmarking rag]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def run(name: str, root: Path) -> tuple[float, float]:
    """Wall and kernel CPU seconds of executing ``notebooks/NAME.ipynb``."""
    import nbformat
    from nbclient import NotebookClient

    spec = root / "jupyter" / "kernels" / "tessera-bench"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "tessera bench", "language": "python"}), encoding="utf-8")
    os.environ.update(JUPYTER_PATH=str(root / "jupyter"), TESSERA_NOTEBOOK_DIR=str(root / "work"),
                      TESSERA_HOME=str(root / "home"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    NotebookClient(book, timeout=600, kernel_name="tessera-bench",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=["quickstart", "benchmarking", "rag"])
    args = parser.parse_args()
    print(f"{'notebook':<14}{'wall s':>9}{'CPU s':>9}{'wall/CPU':>10}   (load average {os.getloadavg()[0]:.1f})")
    for name in args.names:
        with tempfile.TemporaryDirectory(prefix="tessera-nb-") as root:
            wall, cpu = run(name, Path(root))
        print(f"{name:<14}{wall:>9.1f}{cpu:>9.1f}{wall / cpu:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
