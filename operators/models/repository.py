"""A thread-safe repository of loaded objects (models, tokenizers), one per process.

Loading a model is slow and its weights are big, so every operator instance, Ray
actor thread and Serve replica in a process shares one copy. Objects are keyed by a
name and the parameters that decide them (path, device, backend); ``get_or_create``
builds an object once, and callers asking for the same key while it is being built
wait for it instead of building a second copy. A build for one key never blocks
builds for other keys.

Usage::

    model = models.get_or_create("cross_encoder", {"path": p, "device": "cpu"}, lambda: CrossEncoder(p))
    models.delete("cross_encoder", {"path": p, "device": "cpu"})
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Mapping


class ObjectRepository:
    """Objects built once per (name, params) and shared; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str], Any] = {}
        self._building: dict[tuple[str, str], threading.Lock] = {}

    @staticmethod
    def key(name: str, params: Mapping[str, Any] | None = None) -> tuple[str, str]:
        return name, json.dumps(dict(params or {}), sort_keys=True, default=str)

    def get_or_create(self, name: str, params: Mapping[str, Any] | None, build: Callable[[], Any]) -> Any:
        """The object for ``(name, params)``, built by ``build()`` the first time."""
        key = self.key(name, params)
        with self._lock:
            if key in self._objects:
                return self._objects[key]
            gate = self._building.setdefault(key, threading.Lock())
        with gate:  # one builder per key; the others wait here, then find the object
            with self._lock:
                if key in self._objects:
                    return self._objects[key]
            value = build()
            with self._lock:
                self._objects[key] = value
                self._building.pop(key, None)
            return value

    def get(self, name: str, params: Mapping[str, Any] | None = None) -> Any | None:
        with self._lock:
            return self._objects.get(self.key(name, params))

    def delete(self, name: str, params: Mapping[str, Any] | None = None) -> bool:
        """Forget one object (its memory is freed once no caller holds it); True if it was there."""
        with self._lock:
            return self._objects.pop(self.key(name, params), None) is not None

    def clear(self) -> None:
        with self._lock:
            self._objects.clear()

    def keys(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return [(name, json.loads(params)) for name, params in self._objects]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)


#: The process-wide repository every model loader uses.
models = ObjectRepository()
