"""``tessera cache explain`` stays readable: a step's code digest covers dozens of modules, shown as their count and
the operator's own (all with ``--verbose``), and a key that changed since the last run says what changed, down to
the module whose file was edited. A real plugin file, a real run and the real SQLite cache, in-process."""

from __future__ import annotations

import json

from flows.cache_code import class_code
from tests.flows.test_cli import tessera_in_process

PLUGIN = '''"""A plugin operator of the test: its own module, so an edit of this file changes its step key."""
from operators.analyze.word_count import WordCounter


class LoudWords(WordCounter):
    """Count words, as a plugin would."""
    name = "mylab.loud_words"
'''


def test_explain_shows_the_count_and_own_modules_and_names_the_edited_one(tmp_path, monkeypatch, capsys,
                                                                           plugin_module):
    module = plugin_module("explain_plugin", PLUGIN)
    plugins = tmp_path / "plugins"
    flow = tmp_path / "loud.yaml"
    flow.write_text("name: loud\nsteps:\n  loud: {op: mylab.loud_words, params: {input_column: query}}\n")
    queries = tmp_path / "q.txt"
    queries.write_text("honey bees\nkakapo parrots\n")
    home = tmp_path / "home"

    def tessera(*args: str) -> str:
        return tessera_in_process(monkeypatch, capsys, *args, home=home).stdout

    tessera("run", str(flow), "-q", str(queries), "--quiet")
    modules = json.loads(tessera("cache", "explain", str(flow), "--json"))["steps"][0]["code"]["modules"]
    assert len(modules) > 10 and module in modules
    text = tessera("cache", "explain", str(flow))
    line = next(x for x in text.splitlines() if x.lstrip().startswith("code"))
    assert f"of {len(modules)} modules: {module} and {len(modules) - 1} it imports (--verbose lists them)" in line
    assert "operators.base" not in line and "changed since the last run" not in text
    verbose = tessera("cache", "explain", str(flow), "--verbose")
    assert all(m in verbose for m in modules)

    (plugins / f"{module}.py").write_text(PLUGIN + "\n# an edit: its output may differ now\n")
    class_code.cache_clear()  # a new process reads the file again; this one keeps what it read per class
    text = tessera("cache", "explain", str(flow))
    changed = next(x for x in text.splitlines() if "changed since the last run" in x)
    assert f"edited {module}; the last run's entries do not serve the next one" in changed
    [entry] = json.loads(tessera("cache", "explain", str(flow), "--json"))["steps"]
    assert entry["changed"] is True and entry["what_changed"] == [f"edited {module}"]
