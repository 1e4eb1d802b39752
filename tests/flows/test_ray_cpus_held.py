"""A Ray run that starts while actors hold all but a fraction of the cluster's CPUs (a Serve application deployed on
a 2-core cluster holds 1.25) says why it waits: Ray Data's tasks ask for a whole CPU each, and the job printed
nothing after "Running entrypoint" until it was stopped. Real actors on the test session's Ray."""

from __future__ import annotations

import re
import time

import pytest

from flows.executors.ray_nodes import warn_when_no_cpu_free

pytestmark = pytest.mark.ray


def test_a_run_on_a_cluster_with_less_than_a_cpu_free_says_it_waits_and_why(ray_session, caplog):
    ray = ray_session
    said = None
    for _ in range(5):  # other tests' actors (a Serve app's replicas) may come and go meanwhile: try again
        free = ray.available_resources().get("CPU", 0.0)
        holder = None
        if free >= 1:  # an actor that keeps all but half a CPU, as a Serve replica keeps its share
            holder = held_all_but_half_a_cpu(ray, free)
            seen = time.monotonic() + 10  # Ray's view of the resources lags the actor's start
            while ray.available_resources().get("CPU", 0.0) >= 1 and time.monotonic() < seen:
                time.sleep(0.1)
        try:
            available = ray.available_resources()  # one reading for the check and the warning: another test's
            if available.get("CPU", 0.0) < 1:      # task that ended between two readings freed a CPU meanwhile
                with caplog.at_level("WARNING"):
                    said = warn_when_no_cpu_free(available)
                break
        finally:
            if holder is not None:
                ray.kill(holder)
    total = ray.cluster_resources()["CPU"]
    found = re.match(rf"the Ray cluster has ([\d.]+) of its {total:g} CPU\(s\) free: actors hold the rest", said or "")
    assert found and float(found.group(1)) < 1, said
    assert "this run waits until one is free" in said and said in caplog.text
    deadline = time.monotonic() + 30  # the actor gone, its CPUs are free again: nothing to say (unless another
    while ray.available_resources().get("CPU", 0.0) < 1 and time.monotonic() < deadline:  # test's actors hold them)
        time.sleep(0.2)
    assert (warn_when_no_cpu_free() is None) == (ray.available_resources().get("CPU", 0.0) >= 1)


def held_all_but_half_a_cpu(ray, free: float):
    """A ``Holder`` keeping all of the cluster's CPUs but half of one, placed once the short tasks that hold some now
    end; where something keeps them longer, all but half of the ``free`` ones. Sized by what was free alone, the
    holder left a CPU to a task that an earlier test left behind, which took it and gave it back by turns, so the
    cluster showed a CPU free at each of five readings (CI)."""
    from ray.exceptions import GetTimeoutError

    holder = ray.remote(num_cpus=ray.cluster_resources()["CPU"] - 0.5)(Holder).remote()
    try:
        ray.get(holder.ready.remote(), timeout=20)
        return holder
    except GetTimeoutError:
        ray.kill(holder)
    holder = ray.remote(num_cpus=free - 0.5)(Holder).remote()
    ray.get(holder.ready.remote(), timeout=60)
    return holder


class Holder:
    """What a Serve replica is to the cluster: an actor that keeps its CPUs."""

    def ready(self) -> bool:
        return True
