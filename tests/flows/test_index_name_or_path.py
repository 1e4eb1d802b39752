"""``tessera index ACTION NAME_OR_PATH``: the help called the index ``PATH``, but a bare name (no ``/``) is the
index ``$TESSERA_HOME/indices/<name>`` (``tessera index add idxcopy docs.jsonl`` made one there), as
``tessera run --index NAME_OR_PATH`` says. In-process, in a ``$TESSERA_HOME`` of the test's own."""

from __future__ import annotations

import pytest

from tests.flows.test_cli import tessera_in_process

ACTIONS = ("info", "documents", "add", "update", "delete", "compact")


@pytest.mark.parametrize("action", ACTIONS)
def test_each_actions_help_names_the_index_name_or_path_and_says_what_a_name_is(tmp_path, monkeypatch, capsys,
                                                                                 action):
    help_text = tessera_in_process(monkeypatch, capsys, "index", action, "--help", home=tmp_path / "home").stdout
    usage = help_text.split("\n\n")[0]
    assert f"tessera index {action}" in usage and "NAME_OR_PATH" in usage and " PATH" not in usage, usage
    assert "a bare name (no '/'): $TESSERA_HOME/indices/NAME" in help_text


def test_a_bare_name_is_the_index_under_tessera_home_even_beside_a_folder_of_that_name(tmp_path, monkeypatch,
                                                                                         capsys):
    home = tmp_path / "home"
    work = tmp_path / "work"
    (work / "idxcopy").mkdir(parents=True)  # a folder of that name here is not the index a bare name means
    (work / "docs.jsonl").write_text('{"_id": "d1", "text": "honey bees"}\n')
    tessera_in_process(monkeypatch, capsys, "index", "add", "idxcopy", "docs.jsonl", "--no-dense", home=home,
                       cwd=work)
    assert (home / "indices" / "idxcopy" / "manifest.json").is_file() and not any((work / "idxcopy").iterdir())
