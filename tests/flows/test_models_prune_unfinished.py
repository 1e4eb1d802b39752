"""``tessera models prune`` and what writers killed outright leave in ``$TESSERA_HOME/models``: a checkpoint that
``tessera train`` was saving (``.<name>.tmp-<pid>``, its writer's lock free), an ONNX export's partial file
(``.model.<pid>.onnx``) and a folder being pruned (``.<name>.pruning-<pid>``) unchanged for an hour with their pid
gone. A live writer's temporary is never listed, whatever its age. The writers are real processes (forked, running
``write_checkpoint``), killed with SIGKILL; ages are set with ``os.utime``."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from flows.train.checkpoints import write_checkpoint
from operators.stale_writes import GRACE_S
from tests.flows.test_cli import tessera  # noqa: F401 - the fixture
from tests.killed_writers import backdate, dead_pid, forked_writer


def saving(folder: Path) -> int:
    """A child process in ``write_checkpoint(folder)``, its weights half written, waiting to be killed."""
    def write(ready) -> None:
        def save(tmp: Path) -> dict:
            tmp.mkdir(parents=True)
            (tmp / "model.safetensors").write_bytes(b"w" * 4096)
            ready()
            time.sleep(60)
            return {}

        write_checkpoint(folder, save, {"config_key": "a" * 64})

    return forked_writer(write)


def items(tessera, home: Path, *args: str) -> dict[str, dict]:  # noqa: F811
    listed = json.loads(tessera("models", "prune", "--json", *args, home=home).stdout)
    return {Path(i["path"]).name: i for i in listed["items"]}


def test_a_killed_trainings_checkpoint_is_pruned_and_a_live_ones_never(tessera, tmp_path, monkeypatch):  # noqa: F811
    home = tmp_path / "home"
    models = home / "models"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    pid = saving(models / "my-bi")
    tmp = models / f".my-bi.tmp-{pid}"
    try:
        backdate(tmp, 2 * GRACE_S)
        assert items(tessera, home) == {}  # its writer holds the lock: never listed, whatever its age
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    found = items(tessera, home)
    assert list(found) == [tmp.name] and found[tmp.name]["kind"] == "unfinished write"
    assert "lock is free" in found[tmp.name]["why"] and found[tmp.name]["bytes"] == 4096
    assert tmp.is_dir()  # listing removes nothing
    assert list(items(tessera, home, "--yes")) == [tmp.name]
    assert sorted(p.name for p in models.iterdir()) == []  # the folder and its lock file


def test_an_exports_partial_file_and_a_pruning_folder_by_age_and_pid(tessera, tmp_path, monkeypatch):  # noqa: F811
    from operators.models.sentence_transformers import onnx_cache_dir

    home = tmp_path / "home"
    models = home / "models"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    model = models / "my-bi"
    def save(tmp: Path) -> dict:
        tmp.mkdir(parents=True)
        (tmp / "model.safetensors").write_bytes(b"w")
        return {}

    write_checkpoint(model, save, {})
    export = onnx_cache_dir(model)
    export.mkdir()
    (export / "model.onnx").write_bytes(b"\0" * 100)
    (export / "source.json").write_text(json.dumps({"model": str(model)}))
    gone = dead_pid()
    stale, fresh, live = (export / f".model.{gone}.onnx", export / f".model_qint8.{gone}.onnx",
                          export / f".model.{os.getpid()}.onnx")
    for partial in (stale, fresh, live):
        partial.write_bytes(b"\0" * 50)
    backdate(stale, 2 * GRACE_S)
    backdate(live, 2 * GRACE_S)  # old, but its pid runs here
    pruning = models / f".old-previous-{'c' * 12}.pruning-{gone}"
    pruning.mkdir()
    (pruning / "model.safetensors").write_bytes(b"w" * 10)
    backdate(pruning, 2 * GRACE_S)
    found = items(tessera, home)
    assert sorted(found) == sorted([stale.name, pruning.name])
    assert f"its writer (pid {gone}) is gone" in found[stale.name]["why"]
    items(tessera, home, "--yes")
    assert sorted(p.name for p in export.iterdir()) == sorted(["model.onnx", "source.json", fresh.name, live.name])
    assert not pruning.exists() and model.is_dir()


def test_the_list_and_its_total_name_a_partial_file_a_file(tessera, tmp_path, monkeypatch):  # noqa: F811
    """The total said '2 folders' when one of the two was an export's partial file, listed by its bare name."""
    from operators.models.sentence_transformers import onnx_cache_dir

    home = tmp_path / "home"
    models = home / "models"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    model = models / "my-bi"
    write_checkpoint(model, lambda tmp: tmp.mkdir(parents=True) or {}, {})
    export = onnx_cache_dir(model)
    export.mkdir()
    (export / "model.onnx").write_bytes(b"\0" * 100)
    (export / "source.json").write_text(json.dumps({"model": str(model)}))
    gone = dead_pid()
    partial = export / f".model.{gone}.onnx"
    partial.write_bytes(b"\0" * 50)
    pruning = models / f".old-previous-{'c' * 12}.pruning-{gone}"
    pruning.mkdir()
    (pruning / "model.safetensors").write_bytes(b"w" * 10)
    backdate(partial, 2 * GRACE_S)
    backdate(pruning, 2 * GRACE_S)
    text = tessera("models", "prune", home=home).stdout
    assert "total: 1 folder, 1 file, 60 B" in text, text
    assert f"{export.name}/{partial.name}" in text.replace("\n", "").replace(" ", "")  # which export it is in
    assert "removed: 1 folder, 1 file, 60 B" in tessera("models", "prune", "--yes", home=home).stdout
    assert not partial.exists() and not pruning.exists()


def _interrupted_state(models: Path, name: str, epoch: int) -> Path:
    """What ``EpochState.save`` leaves after ``epoch`` of a run that was then interrupted: its files, by its names
    (a torch state of 4 KB stands for the weights; torch's import alone would take seconds)."""
    from flows.train.resume import META_FILE, STATE_FILE, staging_folder

    folder = staging_folder(models / name)
    folder.mkdir(parents=True)
    (folder / STATE_FILE).write_bytes(b"s" * 4096)
    (folder / META_FILE).write_text(json.dumps({"config_key": "k" * 64, "stage": 0, "epoch": epoch}))
    return folder


def test_an_interrupted_trainings_resume_state_is_listed_unless_that_model_is_training(
        tessera, tmp_path, monkeypatch):  # noqa: F811
    home = tmp_path / "home"
    models = home / "models"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    resume = _interrupted_state(models, "my-bi", epoch=2)
    other = _interrupted_state(models, "my-ce", epoch=1)
    pid = saving(models / "my-bi")  # my-bi is training again now: its state is in use
    try:
        assert list(items(tessera, home)) == [other.name]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    found = items(tessera, home)
    assert sorted(found) == sorted([resume.name, other.name, f".my-bi.tmp-{pid}"])
    assert found[resume.name]["kind"] == "interrupted training" and found[resume.name]["bytes"] > 0
    assert "after epoch 2" in found[resume.name]["why"] and "starts over" in found[resume.name]["why"]
    assert resume.is_dir()  # listing removes nothing
    assert sorted(items(tessera, home, "--yes")) == sorted(found)
    assert sorted(p.name for p in models.iterdir()) == []


def test_the_times_it_names_are_utc_and_say_so_whatever_the_machines_zone(tessera, tmp_path, monkeypatch):  # noqa: F811
    """Under TZ=Pacific/Chatham (UTC+12:45 that day) the listing said ``2026-04-05 14:15`` for a state saved at
    01:30 UTC, with no zone; a machine in another zone (or this one before the DST change) said another hour."""
    home = tmp_path / "home"
    resume = _interrupted_state(home / "models", "my-bi", epoch=3)
    unfinished = home / "models" / f".my-ce.tmp-{dead_pid()}"
    unfinished.mkdir()
    saved = 1775352600.0  # 2026-04-05 01:30 UTC, hours after Chatham's summer time (+13:45) ended
    for path in [resume, *resume.iterdir(), unfinished]:
        os.utime(path, (saved, saved))
    with monkeypatch.context() as patch:
        patch.setenv("TZ", "Pacific/Chatham")
        time.tzset()
        try:
            found = items(tessera, home)
        finally:
            patch.undo()
            time.tzset()
    assert "(after epoch 3, 2026-04-05 01:30 UTC)" in found[resume.name]["why"]
    assert "unchanged since 2026-04-05 01:30 UTC" in found[unfinished.name]["why"]
