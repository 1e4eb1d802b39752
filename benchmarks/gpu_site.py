"""The Python packages a lent GPU machine lacks for Ray Data ingestion, packed to be carried (64 MiB at most).

The GPU image has torch, transformers, sentence-transformers, pyarrow, pandas, numpy and Ray's
pure-Python companions (aiohttp, grpcio, protobuf, msgpack, click, ...) but not Ray, FAISS,
pydantic or the lexical packages; nothing can be fetched there. So the missing wheels are
installed here for the image's Python (``--no-deps``: only what the image lacks, at the versions
this checkout pins), stripped of what a local run never loads (Ray's Java workers, the dashboard's
web client, RLlib, the binaries' symbol tables, byte code) and packed as one ``site.tar.xz``::

    .venv/bin/python benchmarks/gpu_site.py .gpu                        # here; .gpu/ is git-ignored
    # on the device (carry [".gpu"]):
    mkdir -p /tmp/site && tar xJf .gpu/site.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
    # with --serve, Ray Serve's packages apart: tar xJf .gpu/site-serve.tar.xz -C /tmp/site

Ray's workers, raylet and GCS inherit PYTHONPATH, so they import the same packages.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

#: Ray Data ingestion (benchmarks/ingest_scale.py, spec ingest, executors local and ray): what the image lacks,
#: pinned as in pyproject.toml / .venv. Found by rehearsal: a Python 3.11 venv of the image's packages only, this
#: site on PYTHONPATH, added to until both ingestions ran (session 62).
PACKAGES = (
    "ray==2.60.0",
    # ray.runtime_env validates plugin schemas with jsonschema at `import ray`
    "jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0", "rpds-py==2026.9.1",
    "faiss-cpu==1.15.1",
    "pydantic==2.14.3", "pydantic-core==2.50.4", "annotated-types==0.8.0", "typing-inspection==0.4.5",
    "bm25s==0.3.16", "PyStemmer==3.1.0",
    "rapidfuzz==3.14.6",  # operators.errors' suggestions for a misspelt name (a 3 MB wheel)
)
#: Ray Serve on top of PACKAGES (serve.run of the embedder deployment, its HTTP proxy): optional, packed apart
#: (``site-serve.tar.xz``, unpacked into the same folder) so it is carried only when it fits.
SERVE_PACKAGES = (
    "starlette==1.10.0", "fastapi==0.136.3", "uvicorn==0.54.0",
    "grpcio-reflection==1.84.0",  # ray.serve imports its gRPC proxy's helpers; the image's grpcio is 1.84.0
)
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64")
#: Never imported by a local Ray Data or Serve run: Java workers (31 MB), the dashboard's web client (Tessera
#: starts Ray without the dashboard), RLlib.
UNUSED = ("ray/jars", "ray/dashboard/client/build", "ray/rllib")
#: Binaries whose symbol tables (a third of their size) serve only stack traces of native crashes.
STRIPPED = ("ray/_raylet.so", "ray/core/src/ray/gcs/gcs_server", "ray/core/src/ray/raylet/raylet")


def install(target: Path, packages: tuple[str, ...], python_version: str) -> None:
    """``pip install --target`` the wheels for the image's Python and platform, without their dependencies."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--target", str(target), "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                    "--implementation", "cp", *platforms, *packages], check=True)


def trim(site: Path) -> None:
    """Remove what a local run never loads: UNUSED folders, byte code, pip's RECORD files, console scripts."""
    for relative in (*UNUSED, "bin"):
        shutil.rmtree(site / relative, ignore_errors=True)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache)
    for record in site.glob("*.dist-info/RECORD"):  # pip's uninstall list; importlib.metadata reads METADATA
        record.unlink()
    strip = shutil.which("strip")
    binaries = [str(site / name) for name in STRIPPED if (site / name).is_file()]
    if strip and binaries:
        subprocess.run([strip, "--strip-unneeded", *binaries], check=True)


def pack(site: Path, archive: Path) -> None:
    """``site``'s contents as an xz tarball (preset 9, extreme), members relative to the site folder."""
    with tarfile.open(archive, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
        for path in sorted(site.iterdir()):
            tar.add(path, arcname=path.name)


def build_site(folder: Path, python_version: str = "3.12", packages: tuple[str, ...] = PACKAGES,
               name: str = "site.tar.xz") -> Path:
    """Install, trim and pack ``packages`` into ``folder/name``; prints its size."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / name
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-site-") as tmp:
        site = Path(tmp) / "site"
        install(site, packages, python_version)
        trim(site)
        unpacked = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        pack(site, archive)
    print(f"{archive}: {archive.stat().st_size / 2**20:.1f} MiB ({unpacked / 2**20:.0f} MiB unpacked, Python "
          f"{python_version}, {len(packages)} packages, {time.perf_counter() - started:.0f} s)")
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for site.tar.xz")
    parser.add_argument("--python-version", default="3.12", help="the device's Python (3.12 on the lent H200)")
    parser.add_argument("--serve", action="store_true", help="also write site-serve.tar.xz (SERVE_PACKAGES)")
    args = parser.parse_args()
    build_site(args.out, args.python_version)
    if args.serve:
        build_site(args.out, args.python_version, SERVE_PACKAGES, name="site-serve.tar.xz")


if __name__ == "__main__":
    main()
