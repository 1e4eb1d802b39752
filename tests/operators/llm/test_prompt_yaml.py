"""A prompt written in YAML without quotes, `prompt: {query}`, is a mapping to YAML: refused saying so and that quotes
fix it, not "prompt takes a name, not a mapping" (a prompt is text)."""

from __future__ import annotations

import pytest

from flows.specfile import load_yaml
from operators.errors import ParamsError
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
