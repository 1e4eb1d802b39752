"""``NodeWatch`` over a node table that changes as a cluster's would (Ray's ``ray.nodes()`` rows): a node that
died is reported only once the job went ``grace_s`` without progress; progress, or no dead node, keeps it quiet.
The real thing (a raylet killed under an ingestion job) is tests/flows/test_jobs_multinode.py."""

from __future__ import annotations

import time

from flows.executors.ray_nodes import NodeWatch


def table(*alive: bool) -> list[dict]:
    return [{"NodeID": f"node{i}" + "0" * 20, "Alive": up, "NodeManagerAddress": f"10.0.0.{i}"}
            for i, up in enumerate(alive)]


def test_a_dead_node_is_reported_after_the_grace_period_without_progress():
    cluster = table(True, True)
    watch = NodeWatch(0.05, nodes=lambda: cluster, check_s=0)
    assert watch.lost() is None
    cluster = table(True, False)
    assert watch.lost() is None  # the grace period starts when the death is seen
    time.sleep(0.1)
    assert watch.lost() == "node10000000 at 10.0.0.1"


def test_progress_after_a_death_keeps_the_job_going():
    cluster = table(True, True)
    watch = NodeWatch(2.0, nodes=lambda: cluster, check_s=0)  # progress 4 times a grace period: a thread stalled
    cluster = table(True, False)                               # for 0.2 s on a loaded machine cannot pass one
    for _ in range(4):
        time.sleep(0.5)
        watch.progress()  # the nodes left took the work over
        assert watch.lost() is None


def test_no_dead_node_is_never_lost_however_long_it_waits():
    cluster = table(True, True)
    watch = NodeWatch(0.0, nodes=lambda: cluster, check_s=0)
    time.sleep(0.05)
    assert watch.lost() is None


def test_a_node_that_was_dead_before_the_job_is_not_its_loss():
    watch = NodeWatch(0.0, nodes=lambda: table(True, False), check_s=0)
    time.sleep(0.05)
    assert watch.lost() is None
