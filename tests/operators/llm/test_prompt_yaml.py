"""A prompt written in YAML without quotes: `prompt: {query}` is a mapping to YAML, and `prompt: {context} Answer:
{query}` no YAML at all. Both are refused saying what YAML made of the text and that quotes fix it, not "prompt takes a
name, not a mapping" (a prompt is text) or "line 8 does not line up with the lines above it"."""

from __future__ import annotations

import pytest

from flows.specfile import load_yaml
from operators.errors import ParamsError, SpecError
from operators.registry import create


@pytest.mark.parametrize("op, written", [("generate.answer", "{query}"), ("summarize.results", "{documents}"),
                                         ("query.expand", "{query}")])
def test_a_prompt_in_braces_without_quotes_is_refused_saying_to_quote_it(op, written):
    params = load_yaml(f"prompt: {written}\n")
    with pytest.raises(ParamsError) as err:
        create(op, params, step_id="s")
    assert err.value.field == "params.prompt"
    assert err.value.message.endswith(f"YAML reads an unquoted {written} as a mapping: put the text in quotes "
                                      f"(prompt: \"{written} ...\")"), err.value.message
    assert "takes a name" not in err.value.message
    create(op, load_yaml(f"prompt: \"{written} and more\"\n"), step_id="s")  # quoted: taken


def test_a_mapping_with_values_for_a_name_still_says_what_the_param_names():
    with pytest.raises(ParamsError) as err:
        create("generate.answer", {"model": {"name": "local"}}, step_id="s")
    assert "model takes a name, not a mapping" in err.value.message and "YAML reads" not in err.value.message


@pytest.mark.parametrize("value, opened", [("{context} Answer: {query}", "{"), ("[1] is the answer to {query}", "[")])
def test_a_prompt_with_text_after_its_braces_is_no_yaml_and_says_to_quote_it(value, opened):
    text = f"name: p\nsteps:\n  answer:\n    op: generate.answer\n    params:\n      prompt: {value}\n"
    with pytest.raises(SpecError) as err:
        load_yaml(text)
    message = str(err.value)
    assert f"line 6: a value that begins with '{opened}' is a {'mapping' if opened == '{' else 'list'} to YAML" in \
        message and f'put text in quotes ("{value[:40]}' in message and "does not line up" not in message, message
    assert load_yaml(text.replace(value, f"'{value}'"))["steps"]["answer"]["params"]["prompt"] == value
