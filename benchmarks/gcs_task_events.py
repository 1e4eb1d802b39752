"""Does Ray's GCS grow with every actor call, and does ``enable_task_events=False`` (what Serve sets on its own actors
and Tessera on its task workers) stop it? A private local Ray (own temp dir, no dashboard), one actor, N calls of a
method that returns at once, the GCS's RSS before and after, for an actor with task events on and one with them off.

    nice -n 10 .venv/bin/python benchmarks/gcs_task_events.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import psutil
import ray


class Echo:
    def ping(self, i: int) -> int:
        return i


def gcs_rss_mb() -> float:
    """RSS of this driver's own GCS: the gcs_server among this process's children (other Rays run here too)."""
    (gcs,) = [p for p in psutil.Process().children(recursive=True) if p.name() == "gcs_server"]
    return gcs.memory_info().rss / 2**20


def run(events: bool, calls: int, named: bool = False) -> float:
    """GCS growth over ``calls`` calls; ``named``: through the handle ``ray.get_actor`` returns (how Tessera's task
    registry reaches a spare), not the one its creation returned."""
    owner = ray.remote(Echo).options(enable_task_events=events, name=f"echo-{events}-{named}").remote()
    actor = ray.get_actor(f"echo-{events}-{named}") if named else owner  # the owner's handle keeps it alive
    ray.get(actor.ping.remote(0))
    time.sleep(3)
    before = gcs_rss_mb()
    for lo in range(0, calls, 1000):
        ray.get([actor.ping.remote(i) for i in range(lo, lo + 1000)])
    time.sleep(5)  # task events reach the GCS every second
    after = gcs_rss_mb()
    ray.kill(owner)
    print(f"enable_task_events={events!s:<5} {'get_actor handle' if named else 'own handle':<16} {calls} calls: "
          f"GCS {before:.1f} -> {after:.1f} MB, {(after - before) * 2**20 / calls:.0f} bytes a call", flush=True)
    return after - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    temp = Path(tempfile.mkdtemp(prefix="gcs-events-"))
    ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.ERROR, _temp_dir=str(temp))
    try:
        for events, named in ((False, False), (False, True), (True, False), (False, False), (False, True)):
            run(events, args.calls, named)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
