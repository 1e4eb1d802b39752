"""Noticing a Ray node that died under a job whose work cannot move elsewhere, and a cluster whose CPUs are held.

When a node dies, Ray restarts the actors it held on the nodes left. If those nodes cannot
hold them (a fixed-size actor pool sized to the whole cluster, and no autoscaler adding a
node), the restarted actors wait for resources for ever and the job stops moving without a
word. ``NodeWatch`` turns that into an error: a node alive when the job started is dead, and
no progress came for ``grace_s`` seconds since (a replacement node, or the nodes left, had
that long to take the work over).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from operators.env_numbers import env_seconds
from operators.errors import see_docs

log = logging.getLogger(__name__)

#: Seconds a job may go without progress after one of its nodes died (``TESSERA_NODE_LOSS_GRACE_S``).
DEFAULT_GRACE_S = 120.0
#: Seconds between two looks at the cluster's nodes.
CHECK_SECONDS = 5.0


def node_loss_grace_s(environ: Mapping[str, str] | None = None) -> float:
    """``$TESSERA_NODE_LOSS_GRACE_S`` (0 or more), else ``DEFAULT_GRACE_S``."""
    return env_seconds("TESSERA_NODE_LOSS_GRACE_S", DEFAULT_GRACE_S, environ=environ)


class NodeWatch:
    """Call ``progress()`` whenever the job moves and ``lost()`` often; ``lost()`` says which node is gone once
    the grace period passed without progress, else None."""

    def __init__(self, grace_s: float | None = None, *, nodes: Callable[[], list[dict]] | None = None,
                 check_s: float = CHECK_SECONDS) -> None:
        import ray

        self.grace_s = node_loss_grace_s() if grace_s is None else grace_s
        self.nodes = nodes or ray.nodes  # Ray's node table: NodeID, Alive, NodeManagerAddress
        self.check_s = check_s
        self.alive = {n["NodeID"]: n.get("NodeManagerAddress", "?") for n in self.nodes() if n.get("Alive")}
        self.moved = self.checked = time.monotonic()
        self.dead: dict[str, str] = {}

    def progress(self) -> None:
        self.moved = time.monotonic()

    def lost(self) -> str | None:
        """``'NODE_ID at ADDRESS'`` of a node that died, once the job has not moved for ``grace_s`` since."""
        now = time.monotonic()
        if now - self.checked >= self.check_s:
            self.checked = now
            for node in self.nodes():
                if node["NodeID"] in self.alive and not node.get("Alive") and node["NodeID"] not in self.dead:
                    self.dead[node["NodeID"]] = self.alive[node["NodeID"]]
                    self.moved = max(self.moved, now)  # the grace period starts when the death is seen
        if self.dead and now - self.moved > self.grace_s:
            node_id, address = next(iter(self.dead.items()))
            return f"{node_id[:12]} at {address}"
        return None


def warn_when_no_cpu_free(available: Mapping[str, float] | None = None,
                          cluster: Mapping[str, float] | None = None) -> str | None:
    """Say so (a warning, and the text returned) when the cluster has less than one CPU free as a run starts: Ray
    Data's tasks ask for one each, and wait for it without a word while actors hold the rest (a Serve application
    deployed on the cluster, another job's actor pools), until they end or an autoscaler adds a node."""
    import ray

    available = ray.available_resources() if available is None else available
    cluster = ray.cluster_resources() if cluster is None else cluster
    free, total = available.get("CPU", 0.0), cluster.get("CPU", 0.0)
    if free >= 1 or not total:
        return None
    text = (f"the Ray cluster has {free:g} of its {total:g} CPU(s) free: actors hold the rest (a Serve application "
            "deployed on it, another job's actor pools). Ray Data's tasks need a whole CPU each, so this run waits "
            "until one is free or an autoscaler adds a node; see "
            f"{see_docs('cluster', 'Jobs beside a Serve application')}")
    log.warning(text)
    return text
