"""The llama.cpp deployment's streamed usage, called in-process (no Serve): with stream_options.include_usage the
last event has no choices and the usage the whole answer reports."""

from __future__ import annotations

import asyncio
import json

import pytest

pytestmark = pytest.mark.slow  # loads the embedded model and generates (seconds on a quiet machine)

QUESTION = [{"role": "user", "content": "Name one insect that makes honey."}]


def events(deployment, body: dict) -> list:
    async def collect():
        return [event async for event in deployment.chat(body)]

    return asyncio.run(collect())


def test_streamed_usage_is_the_whole_answers():
    from serve.deployments.llm import LlamaCppDeployment

    deployment = LlamaCppDeployment.func_or_class("smollm2", "smollm2-135m-instruct", 1)
    for max_tokens in (4, 64):  # stopped by max_tokens, and (the answer is short) by the end-of-text token
        body = {"messages": QUESTION, "max_tokens": max_tokens, "temperature": 0}
        [whole] = events(deployment, body)
        streamed = events(deployment, {**body, "stream": True, "stream_options": {"include_usage": True}})
        assert streamed[-1] == "data: [DONE]\n\n"
        chunks = [json.loads(e[len("data: "):]) for e in streamed[:-1]]
        assert chunks[-1]["choices"] == [] and all("usage" not in c for c in chunks[:-1])
        usage = chunks[-1]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (
            whole["usage"]["prompt_tokens"], whole["usage"]["completion_tokens"]), whole["choices"][0]["finish_reason"]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
        assert text == whole["choices"][0]["message"]["content"]
    plain = events(deployment, {"messages": QUESTION, "max_tokens": 4, "stream": True})
    assert all(json.loads(e[len("data: "):])["choices"] for e in plain[:-1])  # no usage unless asked for
