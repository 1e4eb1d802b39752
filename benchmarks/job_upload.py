"""What ``ray job submit --working-dir .`` uploads from a clone: zip size and time, with and without excludes.

Three packagings of the same folder, side by side, each built with Ray's own packaging code (what the job
client runs before it uploads):

* ``nothing excluded``: no ``.gitignore``, no excludes (``RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES=''`` with a
  clone that has no ``.gitignore``);
* ``ray defaults``: ``.gitignore`` plus Ray 2.60's default excludes (``.git``, ``.venv``, ``venv``, ``__pycache__``);
* ``runtime_env.yaml``: those plus ``cluster/runtime_env.yaml``'s excludes (what docs/cluster.md submits with).

With ``--upload`` each package is also uploaded to a local Ray's GCS (started here, 2 CPUs), as the job client
does, and timed. Goal: the Tessera packaging holds the code and ``data/sample`` only; its ratio to ``nothing
excluded`` is printed. ``--dir`` points at another clone (one after ``make demo`` has a full ``.venv`` and
``.tessera/indices``).

    .venv/bin/python benchmarks/job_upload.py [--dir PATH] [--repeat 3] [--upload]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]


def configurations(folder: Path) -> dict[str, tuple[bool, list[str]]]:
    """name -> (respect .gitignore, excludes)."""
    from ray._private import ray_constants

    defaults = ray_constants.RAY_RUNTIME_ENV_DEFAULT_EXCLUDES.split(",")
    ours = yaml.safe_load((REPO_ROOT / "cluster" / "runtime_env.yaml").read_text(encoding="utf-8"))["excludes"]
    return {"nothing excluded": (False, []), "ray defaults": (True, defaults),
            "runtime_env.yaml": (True, defaults + ours)}


def package(folder: Path, gitignore: bool, excludes: list[str], scratch: Path) -> tuple[float, int, int, Path]:
    """(seconds, zip bytes, files) of one packaging, and the zip."""
    from ray._private.runtime_env.packaging import create_package

    target = scratch / f"{uuid.uuid4().hex}.zip"
    started = time.perf_counter()
    create_package(str(folder), target, include_gitignore=gitignore, excludes=excludes)
    seconds = time.perf_counter() - started
    with zipfile.ZipFile(target) as z:
        files = sum(1 for info in z.infolist() if not info.is_dir())
    return seconds, target.stat().st_size, files, target


def upload(zip_path: Path) -> float:
    """Seconds to put one package into the connected Ray's GCS, as the job client does."""
    from ray._private.runtime_env.packaging import upload_package_to_gcs

    started = time.perf_counter()
    upload_package_to_gcs(f"gcs://_tessera_bench_{uuid.uuid4().hex}.zip", zip_path.read_bytes())
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT, help="the clone to package (default: this one)")
    parser.add_argument("--repeat", type=int, default=3, help="packagings of each kind; the best time is shown")
    parser.add_argument("--upload", action="store_true", help="also upload each package to a local Ray's GCS")
    args = parser.parse_args()
    os.environ.setdefault("RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES", "")  # the defaults come from the configs
    import logging

    logging.getLogger("ray._private.runtime_env.packaging").setLevel(logging.WARNING)
    if args.upload:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="job-upload-") as scratch:
        for name, (gitignore, excludes) in configurations(args.dir.resolve()).items():
            runs = [package(args.dir.resolve(), gitignore, excludes, Path(scratch)) for _ in range(args.repeat)]
            seconds = min(r[0] for r in runs)
            up = None
            if args.upload:
                try:
                    up = min(upload(runs[0][3]) for _ in range(args.repeat))
                except ValueError as err:  # over Ray's package size limit
                    up = str(err).splitlines()[0][:80]
            rows[name] = (seconds, runs[0][1], runs[0][2], up)
            for run in runs:
                run[3].unlink()
    print(f"{args.dir.resolve()}  (best of {args.repeat})")
    print(f"{'packaging':<18} {'files':>7} {'zip MiB':>9} {'zip s':>7} {'upload s':>9}")
    for name, (seconds, size, files, up) in rows.items():
        shown = "-" if up is None else (f"{up:.3f}" if isinstance(up, float) else up)
        print(f"{name:<18} {files:>7} {size / 2**20:>9.2f} {seconds:>7.3f} {shown:>9}")
    ours, bare = rows["runtime_env.yaml"], rows["nothing excluded"]
    print(f"runtime_env.yaml / nothing excluded: size {ours[1] / bare[1]:.3f}, packaging time {ours[0] / bare[0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
