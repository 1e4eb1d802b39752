"""The step cache as the record of a batch's finished model calls (``operators.call_memo``).

Why: the step cache stores a batch's units when the whole batch is done, so a Ctrl-C in the
middle of an LLM step's batch threw away the calls already answered, and a rerun paid for
them again. While a cached step runs a batch, ``StepRunner`` holds a ``BatchCalls`` in force:
each reply is stored the moment it arrives, as an entry of no rows whose metadata is the
reply, under a key of the step's key and the call's id (so a new operator version, new params
or edited code never reads an old reply). When the batch ends, its units are stored as
always and its call entries are dropped (the units hold the same answers); only a batch that
did not end (cancelled, interrupted, failed) leaves them, for the rerun to read back; ``prune`` with an age
removes those saved longer ago (``flows.cache_prune.remove_old_calls``), as a batch never rerun leaves them.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from typing import Any, Sequence

from flows.cache import CacheError, StepCache

log = logging.getLogger(__name__)


class BatchCalls:
    """One batch's call records in ``cache``, under the step key ``step_key``."""

    def __init__(self, cache: StepCache, step_key: str) -> None:
        self.cache = cache
        self.step = bytes.fromhex(step_key)  # the key's first bytes, as a unit's (cache_keys.row_unit_keys)
        self.seed = b"call:" + self.step
        self.keys: set[bytes] = set()  # what this batch read or wrote, dropped when it ends
        self.lock = threading.Lock()

    def _key(self, call: bytes) -> bytes:
        return self.step + hashlib.blake2b(self.seed + call, digest_size=16).digest()

    def recall(self, calls: Sequence[bytes]) -> dict[bytes, dict[str, Any]]:
        keys = {self._key(call): call for call in calls}
        found = self.cache.get(keys)
        with self.lock:
            self.keys.update(found)
        return {keys[key]: unit.meta["call"] for key, unit in found.items()
                if unit.source is None and unit.meta and isinstance(unit.meta.get("call"), dict)}

    def record(self, call: bytes, reply: dict[str, Any]) -> None:
        key = self._key(call)
        try:
            self.cache.put([(key, None, {"call": reply, "saved": time.time()})])  # when: for prune's age rule
        except (sqlite3.Error, OSError, CacheError) as err:  # a saving lost, not a failed call
            log.warning("step cache %s: a finished call could not be recorded (%s)", self.cache.root, err)
            return
        with self.lock:
            self.keys.add(key)

    def forget(self) -> None:
        """Drop this batch's records: its units, stored now, hold its answers."""
        with self.lock:
            keys, self.keys = self.keys, set()
        self.cache.drop(keys)
