"""The llama.cpp deployment, called in-process (no Serve), with a request cancelled before its first token (as Serve
cancels one whose HTTP client left): while it waits for the replica's one sequence, or while its long prompt is
evaluated. It stopped only at its first sampled token, so the prompt was evaluated whole first (4.6 s here for
1,500 tokens) while the next request waited; now it never starts, or its evaluation is aborted."""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.slow  # loads the embedded model and evaluates long prompts (seconds)

COUNT = [{"role": "user", "content": "Count from 1 to 1000, one number after another, separated by commas."}]
LONG = [{"role": "user", "content": "Bees make honey from nectar. " * 220 + "What do bees make?"}]  # ~1,500 tokens


@pytest.fixture(scope="module")
def deployment():
    from serve.deployments.llm import LlamaCppDeployment

    return LlamaCppDeployment.func_or_class("smollm2", "smollm2-135m-instruct", 1)


async def consume(deployment, body: dict, events: list) -> None:
    async for event in deployment.chat(body):
        events.append(event)


async def next_answer_after(deployment) -> float:
    """Seconds until the next request's first event."""
    started, events = time.perf_counter(), []
    await consume(deployment, {"messages": COUNT, "stream": True, "max_tokens": 1, "temperature": 0}, events)
    assert events[-1] == "data: [DONE]\n\n" and len(events) >= 2
    return time.perf_counter() - started


@pytest.mark.parametrize("stream", [True, False])
def test_a_request_cancelled_while_it_waits_for_the_model_is_never_evaluated(deployment, stream):
    async def scenario() -> tuple[int, float]:
        first: list = []
        busy = asyncio.create_task(consume(deployment, {"messages": COUNT, "stream": True, "max_tokens": 30,
                                                        "temperature": 0}, first))
        while not first:  # the model is writing the first answer
            await asyncio.sleep(0.01)
        waiting = asyncio.create_task(consume(deployment, {"messages": LONG, "stream": stream, "max_tokens": 40,
                                                           "temperature": 0}, []))
        await asyncio.sleep(0.2)
        waiting.cancel()  # its client left
        await busy
        tokens = deployment.tokens
        return tokens, await next_answer_after(deployment)

    tokens, seconds = asyncio.run(scenario())
    assert deployment.tokens - tokens == 1, "the cancelled request was evaluated and sampled once the lock was free"
    assert seconds < 3, f"the next request waited {seconds:.1f} s"


@pytest.mark.parametrize("stream", [True, False])
def test_a_request_cancelled_during_its_prompt_evaluation_stops_there(deployment, stream):
    async def scenario() -> tuple[int, float]:
        tokens = deployment.tokens
        evaluating = asyncio.create_task(consume(deployment, {"messages": LONG, "stream": stream, "max_tokens": 40,
                                                              "temperature": 0}, []))
        await asyncio.sleep(0.5)  # its prompt is being evaluated (seconds)
        evaluating.cancel()
        return tokens, await next_answer_after(deployment)

    tokens, seconds = asyncio.run(scenario())
    assert deployment.tokens - tokens == 1, "the cancelled request's prompt was evaluated whole, then it sampled"
    assert seconds < 3, f"the next request waited {seconds:.1f} s"
