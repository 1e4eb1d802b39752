"""``tessera models``' advice for an Ollama server that does not answer names what decides where it is asked: the
alias's own ``api_base`` (which wins over ``$OLLAMA_API_BASE``, so setting the variable changed nothing, as the
advice said to do), else the variable. A real closed port on localhost."""

from __future__ import annotations

from operators.llm.aliases import ModelAlias
from operators.llm.reachable import reachability
from operators.llm.testing import closed_port


def test_an_ollama_alias_with_its_own_api_base_is_told_to_change_that(monkeypatch):
    port = closed_port()
    ok, why = reachability(ModelAlias(model="ollama_chat/x", api_base=f"http://127.0.0.1:{port}"), timeout=2)
    assert not ok and f"no Ollama server answers on http://127.0.0.1:{port}" in why, why
    assert "change the alias's api_base in its models file" in why and "OLLAMA_API_BASE" not in why
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{port}")
    ok, why = reachability(ModelAlias(model="ollama_chat/x"), timeout=2)
    assert not ok and why.endswith("start it (ollama serve), or set OLLAMA_API_BASE to where it runs"), why


def test_an_ollama_api_base_without_its_scheme_is_said_to_be_no_url(monkeypatch):
    """``OLLAMA_API_BASE=localhost:11434`` said "no Ollama server answers on localhost:11434 (InvalidSchema); ... or
    set OLLAMA_API_BASE to where it runs", which it was set to; a run of a flow naming such a model is refused so."""
    from flows.model_check import check_env
    from flows.spec import FlowSpec
    from operators.llm.reachable import ModelUnreachableError

    monkeypatch.setenv("OLLAMA_API_BASE", "localhost:11434")
    ok, why = reachability(ModelAlias(model="ollama_chat/x"), timeout=2)
    assert not ok and why == ("$OLLAMA_API_BASE is 'localhost:11434', not a server's URL: give http:// or https:// "
                              "and its host (such as http://localhost:11434)"), why
    spec = FlowSpec.parse({"steps": {"answer": {"op": "generate.answer", "params": {"model": "gemma2"}}}})
    try:
        check_env(spec)
    except ModelUnreachableError as err:
        assert err.field == "steps.answer.params.model" and "$OLLAMA_API_BASE is 'localhost:11434'" in err.message
    else:
        raise AssertionError("not refused")


def test_the_embedded_model_without_llama_cpp_says_the_pip_line_not_make_demo(monkeypatch):
    """Where llama-cpp-python is missing (a wheel installed with --no-deps, a llama.cpp build that failed), `tessera
    models` and a run said "make demo installs it", which a user of an installed wheel has no Makefile for; now both
    say the pip line of the pinned engine. ``sys.modules[name] = None`` is how Python itself hides a module."""
    import sys

    import pytest

    from operators.llm.embedded_model import ENGINE_REQUIREMENT, load
    from operators.models.references import ModelNotFoundError

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    ok, why = reachability(ModelAlias(model="tessera/smollm2-135m-instruct"))
    assert not ok and why.startswith(f"llama-cpp-python is not installed: pip install {ENGINE_REQUIREMENT}"), why
    assert "make demo" not in why
    with pytest.raises(ModelNotFoundError) as err:
        load("smollm2-135m-instruct", threads=97)  # a thread count no other test loads with: not a model held
    assert f"pip install {ENGINE_REQUIREMENT}" in err.value.message and "make demo" not in err.value.message
