"""A Ray run that starts while actors hold all but a fraction of the cluster's CPUs (a Serve application deployed on
a 2-core cluster holds 1.25) says why it waits: Ray Data's tasks ask for a whole CPU each, and the job printed
nothing after "Running entrypoint" until it was stopped. Real actors on the test session's Ray."""

from __future__ import annotations

import time

import pytest

from flows.executors.ray_nodes import warn_when_no_cpu_free

pytestmark = pytest.mark.ray


def free_cpus(ray, at_least: float = 0.0, at_most: float = float("inf"), seconds: float = 30) -> float:
    """The cluster's free CPUs once they are within the bounds (Ray's view of an actor's resources lags its start)."""
    deadline = time.monotonic() + seconds
    while True:
        free = ray.available_resources().get("CPU", 0.0)
        if at_least <= free <= at_most or time.monotonic() > deadline:
            return free
        time.sleep(0.2)


def test_a_run_on_a_cluster_with_less_than_a_cpu_free_says_it_waits_and_why(ray_session, caplog):
    ray = ray_session
    free = free_cpus(ray, at_least=1)
    assert free >= 1 and warn_when_no_cpu_free() is None

    @ray.remote(num_cpus=free - 0.75)
    class Holder:  # what a Serve replica is to the cluster: an actor that keeps its CPUs
        def ready(self) -> bool:
            return True

    holder = Holder.remote()
    try:
        ray.get(holder.ready.remote())
        assert free_cpus(ray, at_most=0.75) == pytest.approx(0.75)
        with caplog.at_level("WARNING"):
            said = warn_when_no_cpu_free()
        total = ray.cluster_resources()["CPU"]
        assert said is not None and said.startswith(f"the Ray cluster has 0.75 of its {total:g} CPU(s) free"), said
        assert "this run waits until one is free" in said and said in caplog.text
    finally:
        ray.kill(holder)
    assert free_cpus(ray, at_least=1) >= 1 and warn_when_no_cpu_free() is None
