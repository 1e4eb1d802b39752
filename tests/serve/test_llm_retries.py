"""A language-model step placed on a deployment tries a call again when the replica answering it dies, unless part
of the answer was already streamed to a reader (a second answer would repeat it). The replica is killed for real,
mid-answer; Serve starts another."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from operators import create
from operators.testing import sample_results

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def replicas() -> list[str]:
    """The names of the live replica actors of ``tessera/smollm2`` (Serve names them ``SERVE_REPLICA::app#dep#id``)."""
    import ray

    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == "serve" and a["name"].startswith("SERVE_REPLICA::tessera#smollm2#")]


def generation_steps() -> int:
    from ray import serve

    return serve.get_deployment_handle("smollm2", app_name="tessera").info.remote().result()["tokens"]


def run_killing_replicas(run: Callable[[], object]) -> tuple[object, list[str]]:
    """``run()``'s result, and the replicas of smollm2 killed once its generation had begun (3 tokens written)."""
    import ray

    before, killed = generation_steps(), []

    def kill() -> None:
        deadline = time.monotonic() + 60
        while generation_steps() < before + 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        killed.extend(replicas())
        for name in killed:
            ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)

    watch = threading.Thread(target=kill)
    watch.start()
    result = run()
    watch.join()
    assert killed, "no replica of smollm2 was found to kill"
    assert not set(killed) & set(replicas()), "a killed replica still lives"
    return result, killed


def test_a_placed_call_whose_replica_dies_is_answered_by_the_next_replica(serve_app):
    from flows.placement import place

    step = place(create("summarize.documents", {"model": "local", "max_tokens": 80}, step_id="summary"),
                 deployment="smollm2")
    table = sample_results(1, 1)
    out, _ = run_killing_replicas(lambda: step(table))
    meta = step.drain_metadata().get("q1", {})
    assert "degraded" not in meta, meta.get("degraded")
    summary, text = out.column("summary")[0].as_py(), table.column("text")[0].as_py()
    assert summary and summary != text
    assert meta["usage"]["summary"]["completion_tokens"] > 0


def test_a_streamed_answer_whose_replica_dies_degrades_rather_than_repeat_itself(serve_app):
    from flows.placement import place
    from operators.generate.answer_stream import streaming_answers

    count = "Count from 1 to 1000, one number after another, separated by commas. {query}"  # a long answer
    step = place(create("generate.answer", {"model": "local", "max_tokens": 400, "style": "sentences",
                                            "prompt": count}, step_id="answer"), deployment="smollm2")
    table = create("generate.context", {"max_context_length": 50})(sample_results(1, 1))
    pieces: list[str] = []
    with streaming_answers(lambda qid, text: pieces.append(text)):
        run_killing_replicas(lambda: step(table))
    degraded = step.drain_metadata()["q1"]["degraded"]
    assert pieces, "nothing was streamed before the replica died"
    assert degraded["step"] == "answer" and "failed: ActorDiedError" in degraded["reason"], degraded
