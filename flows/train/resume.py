"""Resuming an interrupted training run from its last finished epoch.

A Ctrl-C or a killed job used to restart the model from its first step. The trainers built on
``_loop.fit`` (the cross-encoder and the bi-encoder; ColBERT has its own loop and does not resume) save,
at the end of each epoch with more to come, the model's weights, the optimiser's and the schedule's state,
the torch RNG state and the losses so far into a staging folder beside the checkpoint,
``<output>/.<name>.resume/``, with the run's config key. The same command run again (the same key: the
same examples, base and settings) loads it and goes on from the next epoch, over the batches it would have
had; a run with other settings starts over and says so in one line. The folder is deleted once the
checkpoint is in place (and by ``--force``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from flows.train.checkpoints import changed_inputs

#: The kinds whose training resumes (``_loop.fit``).
RESUMABLE = ("cross-encoder", "bi-encoder")
STATE_FILE = "state.pt"
META_FILE = "resume.json"
#: How the line that says an epoch was saved ends (``tessera train`` reads it to say so again at a Ctrl-C).
RESUMES_HERE = " (an interrupted run resumes from here)"


def staging_folder(folder: Path) -> Path:
    """Where the resumable state of the checkpoint ``folder`` is kept while it trains."""
    return folder.with_name(f".{folder.name}.resume")


class EpochState:
    """The resumable state of one model's training, kept under ``folder`` for the config ``key``."""

    def __init__(self, folder: Path, key: str, key_inputs: dict[str, Any], kind: str, log: Callable[[str], None]):
        self.folder, self.key, self.key_inputs, self.kind, self.log = Path(folder), key, key_inputs, kind, log
        self.resumed_from: dict[str, int] | None = None  # {"stage", "epoch"} of the state this run went on from

    def load(self) -> dict[str, Any] | None:
        """The state saved by an interrupted run of the same key, or None (a state of other settings is
        deleted, with one line saying why)."""
        try:
            meta = json.loads((self.folder / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.clear()  # nothing, or a state whose save was cut short
            return None
        if meta.get("config_key") != self.key:
            self.log(f"{self.kind}: not resuming the interrupted run in {self.folder}: "
                     f"{changed_inputs(meta, self.key_inputs)}; starting over")
            self.clear()
            return None
        import torch

        try:
            state = torch.load(self.folder / STATE_FILE, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any unreadable state: train from the start rather than fail
            self.log(f"{self.kind}: not resuming: the state in {self.folder} cannot be read ({err}); starting over")
            self.clear()
            return None
        self.resumed_from = {"stage": state["stage"], "epoch": state["epoch"]}
        stage = f" of stage {state['stage'] + 1}" if state["stage"] else ""
        self.log(f"{self.kind}: resuming the interrupted run after epoch {state['epoch']}{stage} "
                 f"({len(state['losses'])} steps done; state in {self.folder})")
        return state

    def save(self, *, stage: int, epoch: int, model: Any, optimizer: Any, schedule: Any,
             losses: list[float]) -> None:
        """Write the state after ``epoch`` (1-based) of ``stage``: the file under a temporary name, then renamed,
        so a run killed while saving keeps the previous epoch's state."""
        import torch

        self.folder.mkdir(parents=True, exist_ok=True)
        state = {"config_key": self.key, "stage": stage, "epoch": epoch, "model": model.state_dict(),
                 "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                 "rng": torch.get_rng_state(), "losses": list(losses)}
        tmp = self.folder / f"{STATE_FILE}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.folder / STATE_FILE)
        meta = {"config_key": self.key, "key_inputs": self.key_inputs, "stage": stage, "epoch": epoch}
        (self.folder / f"{META_FILE}.tmp").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
        os.replace(self.folder / f"{META_FILE}.tmp", self.folder / META_FILE)
        self.log(f"{self.kind}: epoch {epoch}{f' of stage {stage + 1}' if stage else ''} done; saved in "
                 f"{self.folder}{RESUMES_HERE}")

    def restore(self, state: dict[str, Any], model: Any, optimizer: Any, schedule: Any) -> None:
        """Put a loaded ``state`` back into the model, optimiser, schedule and torch's RNG."""
        import torch

        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["rng"])

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
