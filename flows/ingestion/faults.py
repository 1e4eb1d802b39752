"""Fault hooks for the fault tests, from ``TESSERA_FAULT`` (read once, on the driver).

``TESSERA_FAULT`` is a comma-separated list of ``kind:target``; a shard target is the
shard id (``3f2a9c1e-00001``) or its number (``1``):

* ``kill_worker_once:<shard>`` the process embedding the shard SIGKILLs itself once,
  half-way through the shard (a marker file under ``<index>/_ingest/faults/`` remembers
  it fired, so the retried task goes through). With ``--executor local`` the process
  is the driver.
* ``crash_after_write:<shard>`` the driver exits (``os._exit(75)``) after the shard is
  written and before the manifest records it.
* ``fail_embed:<doc_id>`` the encoder raises for every batch holding the document, as a
  broken model or input would; the document ends in the failure ledger.

The driver parses the variable once (``Faults.from_env``) and passes the result to the
workers as an argument, so Ray workers started before the variable was set see it too.
Unset (the normal case), every hook is a no-op.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from flows.ingestion.errors import IngestError, InjectedFault

ENV = "TESSERA_FAULT"
KINDS = ("kill_worker_once", "crash_after_write", "fail_embed")
CRASH_EXIT_STATUS = 75


def _shard_matches(target: str, shard: str) -> bool:
    if target == shard:
        return True
    return target.isdigit() and shard.rsplit("-", 1)[-1] == f"{int(target):05d}"


@dataclass(frozen=True)
class Faults:
    """The active fault hooks (all empty when ``TESSERA_FAULT`` is unset)."""

    kill_worker_once: tuple[str, ...] = ()
    crash_after_write: tuple[str, ...] = ()
    fail_embed: tuple[str, ...] = ()
    marker_dir: str | None = None

    @classmethod
    def from_env(cls, marker_dir: str | Path | None = None) -> "Faults":
        spec = os.environ.get(ENV, "").strip()
        found: dict[str, list[str]] = {kind: [] for kind in KINDS}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            kind, _, target = item.partition(":")
            if kind not in found or not target:
                raise IngestError(f"{ENV}: '{item}' is not one of {', '.join(k + ':<target>' for k in KINDS)}")
            found[kind].append(target)
        return cls(**{k: tuple(v) for k, v in found.items()},
                   marker_dir=None if marker_dir is None else str(marker_dir))

    def __bool__(self) -> bool:
        return bool(self.kill_worker_once or self.crash_after_write or self.fail_embed)

    # -- the hooks ------------------------------------------------------------------

    def maybe_kill_worker(self, shard: str) -> None:
        """SIGKILL this process the first time it embeds ``shard`` (a killed Ray worker)."""
        if not any(_shard_matches(t, shard) for t in self.kill_worker_once):
            return
        marker = Path(self.marker_dir or ".") / f"killed-{shard}"
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return  # fired before: let the retry through
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    def maybe_crash_after_write(self, shard: str) -> None:
        """Exit the driver between a shard's write and its manifest commit."""
        if any(_shard_matches(t, shard) for t in self.crash_after_write):
            os._exit(CRASH_EXIT_STATUS)

    def check_embed(self, doc_ids: Iterable[str]) -> None:
        """Raise as an encoder error would, for a batch holding a ``fail_embed`` document."""
        if self.fail_embed:
            bad = set(self.fail_embed).intersection(doc_ids)
            if bad:
                raise InjectedFault(f"injected encoder failure for {sorted(bad)} ({ENV})")
