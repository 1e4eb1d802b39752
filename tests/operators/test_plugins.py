"""Operators from outside the Tessera tree: a real package written into ``tmp_path``, registered through
``TESSERA_OPERATORS`` and through a ``tessera.operators`` entry point (a real ``.dist-info`` with its
``entry_points.txt`` on the path, which ``importlib.metadata`` reads as it reads an installed package's), then
used by a flow through the Python API and by ``tessera run``/``tessera ops`` in a subprocess; and the contract
test run against it with the repository's ``data/`` out of reach, as from an installed Tessera."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import textwrap
import tomllib
from pathlib import Path

import pyarrow as pa
import pytest

from operators import registry, testing
from operators.registry import OperatorPluginError, all_operators, create, get_operator
from operators.testing import OperatorContract, sample_documents
from tests.flows.test_cli import assert_one_line_error, tessera_in_process, tessera_process

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "tessera_mylab"
OPERATOR = "mylab.keyword_flag"

FLAGS = '''\
"""Keyword flag chip: an operator that lives in its own package."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import set_column


class KeywordFlagger(Operator):
    """Flag the rows whose text contains a keyword, as a chip."""

    name = "mylab.keyword_flag"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        keyword: str = Field("honey", min_length=1, description="Word looked for, in any case.")
        input_column: str = Field("text", description="Column searched for the keyword.")
        output_column: str = Field("has_keyword", description="Column that receives the flag.")

    def reads(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "chip"}

    def transform(self, table: pa.Table) -> pa.Table:
        text = pc.utf8_lower(pc.fill_null(table.column(self.params.input_column).cast(pa.string()), ""))
        return set_column(table, self.params.output_column, pc.match_substring(text, self.params.keyword.lower()))
'''

CORPUS = [
    {"_id": "d1", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."},
    {"_id": "d2", "title": "Wasp", "text": "Wasps are insects that do not make honey but visit flowers."},
    {"_id": "d3", "title": "Opera", "text": "An opera is a drama set to music, composed for singers."},
]


def write_package(root: Path, modules: dict[str, str]) -> Path:
    """``root/tessera_mylab/`` with ``modules`` (name -> source) besides an empty ``__init__.py``."""
    package = root / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""A researcher\'s own operators."""\n')
    for name, source in modules.items():
        (package / f"{name}.py").write_text(textwrap.dedent(source))
    return root


def load_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, str], module: str) -> Path:
    """A researcher's first plugin: ``modules`` written as the plugin package under ``tmp_path/site``, importable,
    its ``module`` named in ``TESSERA_OPERATORS``, and ``TESSERA_HOME`` in ``tmp_path/home``. The folder on
    ``sys.path``."""
    root = write_package(tmp_path / "site", modules)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.{module}")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return root


def write_dist_info(root: Path, entry_points: str) -> None:
    """What ``pip install`` leaves for a distribution ``tessera-mylab`` whose pyproject.toml has
    ``[project.entry-points."tessera.operators"]``: its METADATA and its entry_points.txt."""
    dist = root / "tessera_mylab-0.1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tessera-mylab\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[tessera.operators]\n{entry_points}\n")


@pytest.fixture
def fresh_registry(isolated_registry):
    """An empty registry for the test (restored after it), no ``TESSERA_OPERATORS``, and the plugin package
    forgotten afterwards, so no other test sees the plugin."""
    yield
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def plugin_root(tmp_path, monkeypatch, fresh_registry) -> Path:
    """The plugin package, importable (first on ``sys.path``), not yet registered."""
    root = write_package(tmp_path / "site", {"flags": FLAGS})
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return root


def flow_spec(tmp_path: Path) -> dict:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    return {"name": "flagged", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 2}},
        "flag": {"op": OPERATOR, "params": {"keyword": "HONEY"}},
    }}


def run_flow(tmp_path: Path) -> pa.Table:
    from flows.api import Flow

    return Flow.load(flow_spec(tmp_path)).run("honey bees").table


def test_a_module_in_tessera_operators_is_registered_and_runs_in_a_flow(plugin_root, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_OPERATORS", f" {PACKAGE}.flags , ")
    ops = all_operators()
    assert ops[OPERATOR].__module__ == f"{PACKAGE}.flags" and "analyze.word_count" in ops  # besides the built-ins
    assert get_operator(OPERATOR).category() == "mylab"
    table = run_flow(tmp_path)
    assert table.column("docno").to_pylist() == ["d1", "d2"]
    assert table.column("has_keyword").to_pylist() == [True, True]


def test_a_module_named_after_the_first_lookup_is_loaded_at_the_next(plugin_root, monkeypatch):
    """A notebook sets TESSERA_OPERATORS after Tessera has listed its operators."""
    assert OPERATOR not in all_operators()
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    assert create(OPERATOR, {"keyword": "opera"})(pa.table({"text": ["An opera.", None]})).column(
        "has_keyword").to_pylist() == [True, False]


def test_an_operator_moved_to_another_module_named_instead_is_the_new_one(plugin_root, monkeypatch):
    """A notebook moves its class to another module and names that one in TESSERA_OPERATORS instead: the module no
    longer named kept its operator registered, an OperatorPluginError 'used by both' until the kernel restarted."""
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    assert get_operator(OPERATOR).__module__ == f"{PACKAGE}.flags"
    (plugin_root / PACKAGE / "flags2.py").write_text(FLAGS)
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags2")
    assert get_operator(OPERATOR).__module__ == f"{PACKAGE}.flags2"
    monkeypatch.delenv("TESSERA_OPERATORS")
    assert OPERATOR not in all_operators() and "analyze.word_count" in all_operators()


@pytest.mark.parametrize("entry_point", [f"mylab = {PACKAGE}.flags", f"keyword_flag = {PACKAGE}.flags:KeywordFlagger"],
                         ids=["module", "class"])
def test_an_entry_point_naming_a_module_or_a_class_registers_it(plugin_root, tmp_path, entry_point):
    from flows.cache_code import code_identity, package_version

    write_dist_info(plugin_root, entry_point)
    assert all_operators()[OPERATOR].__name__ == "KeywordFlagger"
    assert run_flow(tmp_path).column("has_keyword").to_pylist() == [True, True]
    package_version.cache_clear()  # read once per process: forget what an earlier test's process state gave
    # an installed plugin's step key holds its package's version: an upgrade misses, helpers changed included
    assert code_identity(create(OPERATOR, {}))["packages"] == {PACKAGE: "0.1.0"}


@pytest.mark.parametrize("how", ["TESSERA_OPERATORS", "entry point"])
def test_a_plugin_module_reloaded_after_an_edit_runs_its_new_code(plugin_root, tmp_path, monkeypatch, how):
    """A notebook edits its operator and reloads the module (``importlib.reload``): the registry kept the class from
    before the edit, so the next flow ran the old code, while the step cache keyed the new; and an operator the
    edit added to a ``TESSERA_OPERATORS`` module was unknown."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # the edit is read from the source, within the second
    if how == "entry point":
        write_dist_info(plugin_root, f"keyword_flag = {PACKAGE}.flags:KeywordFlagger")
    else:
        monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    assert run_flow(tmp_path).column("has_keyword").to_pylist() == [True, True]
    flags_file = plugin_root / PACKAGE / "flags.py"
    edited = flags_file.read_text().replace("pc.match_substring(text, self.params.keyword.lower())",
                                            "pc.starts_with(text, self.params.keyword.lower())")
    flags_file.write_text(edited + FLAGS.split("\n\n\n", 1)[1].replace("KeywordFlagger", "OtherFlagger")
                          .replace('"mylab.keyword_flag"', '"mylab.other_flag"'))
    importlib.reload(importlib.import_module(f"{PACKAGE}.flags"))
    assert run_flow(tmp_path).column("has_keyword").to_pylist() == [True, False]  # the wasp: no longer flagged
    assert get_operator(OPERATOR) is sys.modules[f"{PACKAGE}.flags"].KeywordFlagger
    assert ("mylab.other_flag" in all_operators()) is (how == "TESSERA_OPERATORS")


def test_a_module_entry_point_registers_the_operators_of_its_submodules(plugin_root):
    (plugin_root / PACKAGE / "__init__.py").write_text("from tessera_mylab.flags import KeywordFlagger\n")
    write_dist_info(plugin_root, f"mylab = {PACKAGE}")
    assert all_operators()[OPERATOR].__module__ == f"{PACKAGE}.flags"


@pytest.mark.integration  # the command line end to end, four processes: in make test, not the inner loop
@pytest.mark.parametrize("how", ["entry point", "TESSERA_OPERATORS"])
def test_tessera_ops_lists_the_plugin_and_tessera_run_runs_it(plugin_root, tmp_path, monkeypatch, how):
    """The installed script in a subprocess, which finds the plugin as a user's shell would: on PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", str(plugin_root))
    if how == "entry point":
        write_dist_info(plugin_root, f"mylab = {PACKAGE}.flags")
    else:
        monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    home = tmp_path / "home"
    listed = tessera_process("ops", home=home).stdout
    assert OPERATOR in listed and "Flag the rows whose text contains a keyword" in listed
    spec = tmp_path / "flagged.json"
    spec.write_text(json.dumps(flow_spec(tmp_path)))
    result = json.loads(tessera_process("run", str(spec), "-q", "honey bees", "--executor", "local", "--json",
                                        "--no-cache", "--quiet", home=home).stdout)
    assert [(r["docno"], r["has_keyword"]) for r in result["rows"]] == [("d1", True), ("d2", True)]
    assert result["roles"]["has_keyword"] == "chip"


@pytest.mark.integration  # two runs of the command line
def test_a_plugins_edited_code_misses_the_step_cache(plugin_root, tmp_path, monkeypatch):
    """While a plugin is being written its ``version`` stays put: the key holds its source file's digest, so the
    second run computes the edited flag instead of replaying the first run's from the cache."""
    from flows.cache_code import code_identity

    monkeypatch.setenv("PYTHONPATH", str(plugin_root))
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    spec, home = tmp_path / "flagged.json", tmp_path / "home"
    spec.write_text(json.dumps(flow_spec(tmp_path)))

    def flags() -> list[bool]:
        out = tessera_process("run", str(spec), "-q", "honey bees", "--executor", "local", "--json", "--quiet",
                              home=home).stdout
        return [row["has_keyword"] for row in json.loads(out)["rows"]]

    assert flags() == [True, True]
    flags_file = plugin_root / PACKAGE / "flags.py"
    flags_file.write_text(flags_file.read_text().replace("pc.match_substring(text, self.params.keyword.lower())",
                                                         "pc.starts_with(text, self.params.keyword.lower())"))
    assert flags() == [True, False]  # "Wasps are insects that do not make honey": no longer flagged
    # the key names the plugin's module and Tessera's base, the modules that define the operator's classes, and the
    # Tessera modules they import (operators.tables, from flags.py and base.py); no other module of the plugin
    modules = code_identity(create(OPERATOR, {}))["modules"]
    assert {"operators.base", "operators.tables", f"{PACKAGE}.flags"} <= set(modules)
    assert [module for module in modules if not module.startswith("operators.")] == [f"{PACKAGE}.flags"]


def test_a_plugin_edited_under_the_running_process_is_not_cached_as_the_edit(plugin_root, tmp_path, monkeypatch,
                                                                            caplog):
    """A notebook runs its operator without the cache, edits the file and runs it with the cache, not reloading: the
    old code ran, and its output was stored under the key of the edited file, which a later process (here a reload:
    the edit's classes) replayed as the new code's output."""
    from flows.api import Flow

    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # the edit is read from the source, within the second
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    spec, cache = flow_spec(tmp_path), tmp_path / "cache"

    def flags(**options) -> tuple[list, int]:
        result = Flow.load(spec).run("honey bees", **options)
        return result.table.column("has_keyword").to_pylist(), result.steps["flag"].hits

    assert flags() == ([True, True], 0)  # registered and run; no key read yet
    flags_file = plugin_root / PACKAGE / "flags.py"
    flags_file.write_text(flags_file.read_text().replace("pc.match_substring(text, self.params.keyword.lower())",
                                                         "pc.starts_with(text, self.params.keyword.lower())"))
    with caplog.at_level(logging.WARNING, logger="flows.cache_code"):
        assert flags(cache=cache) == ([True, True], 0)  # the code imported before the edit runs
    assert f"the file of {PACKAGE}.flags changed since this process imported it" in caplog.text
    assert flags(cache=cache) == ([True, True], 2)  # this process's own entries serve it
    importlib.reload(sys.modules[f"{PACKAGE}.flags"])  # the edit's code, as a new process runs it
    assert flags(cache=cache) == ([True, False], 0)  # computed, not the old code's output replayed


MARKED = '''\
"""A flag that its package's helper module decides."""

import pyarrow as pa

from operators.base import Operator
from operators.tables import set_column
from tessera_mylab.helpers import MARK


class Marker(Operator):
    """Marks each row with the helper's mark."""

    name = "mylab.mark"

    def produces(self):
        return {"mark": "chip"}

    def transform(self, table):
        return set_column(table, "mark", pa.array([MARK] * table.num_rows))
'''


def test_a_plugins_helper_edited_under_the_running_process_is_not_cached_as_the_edit(plugin_root, tmp_path,
                                                                                    monkeypatch):
    """The same for a helper module of the plugin's package (``mylab/_helpers.py``), which the key digests too."""
    from flows.api import Flow

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    write_package(plugin_root, {"helpers": "MARK = 'old'\n", "marked": MARKED})
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.marked")
    spec, cache = flow_spec(tmp_path), tmp_path / "cache"
    spec["steps"]["flag"] = {"op": "mylab.mark"}

    def marks(**options) -> tuple[list, int]:
        result = Flow.load(spec).run("honey bees", **options)
        return result.table.column("mark").to_pylist(), result.steps["flag"].hits

    assert marks() == (["old", "old"], 0)
    (plugin_root / PACKAGE / "helpers.py").write_text("MARK = 'new'\n")
    assert marks(cache=cache) == (["old", "old"], 0)  # the helper imported before the edit runs
    for module in (f"{PACKAGE}.helpers", f"{PACKAGE}.marked"):  # the edit's code, as a new process runs it
        importlib.reload(sys.modules[module])
    assert marks(cache=cache) == (["new", "new"], 0)


# -- a plugin that cannot be registered: one line naming it -------------------------------------------------

BROKEN = {
    "import": ({"broken": "import not_a_module_anywhere\n"}, "broken = tessera_mylab.broken",
               ["entry point 'broken = tessera_mylab.broken'", "failed to import",
                "ModuleNotFoundError: No module named 'not_a_module_anywhere'"]),
    "not an operator": ({"helpers": "def flag(table):\n    return table\n"}, "flag = tessera_mylab.helpers:flag",
                        ["entry point 'flag = tessera_mylab.helpers:flag'", "names a function",
                         "not a module or an Operator subclass"]),
    "no operator": ({"helpers": "X = 1\n"}, "mylab = tessera_mylab.helpers",
                    ["module 'tessera_mylab.helpers' defines no Operator subclass with a name"]),
    "no name": ({"unnamed": "from operators.base import Operator\n\nclass Unnamed(Operator):\n    '''x.'''\n"},
                "unnamed = tessera_mylab.unnamed:Unnamed",
                ["tessera_mylab.unnamed.Unnamed has no name", "name = 'category.snake_name'"]),
    "bad name": ({"odd": "from operators.base import Operator\n\nclass Odd(Operator):\n    name = 'Odd'\n"},
                 "odd = tessera_mylab.odd", ["name 'Odd' is not 'category.snake_name'"]),
    "shadows a built-in": (
        {"mine": "from operators.base import Operator\n\n"
                 "class MyCounter(Operator):\n    name = 'analyze.word_count'\n"},
        "mine = tessera_mylab.mine",
        ["operator name 'analyze.word_count' is used by both operators.analyze.word_count.WordCounter (built-in)",
         "and tessera_mylab.mine.MyCounter (entry point 'mine = tessera_mylab.mine'",
         "; a plugin cannot replace a built-in: give yours a name of its own, such as "
         "'tessera_mylab.word_count', and use it in your flows"]),
    "inherits a built-in's name": (
        {"sub": "from operators.analyze.word_count import WordCounter\n\nclass Sub(WordCounter):\n    pass\n"},
        "sub = tessera_mylab.sub:Sub", ["used by both operators.analyze.word_count.WordCounter",
                                        "(it inherits the name: give it its own)"]),
    "alias of a built-in": (
        {"alias": "from operators.base import Operator\n\nclass A(Operator):\n    name = 'mylab.a'\n"
                  "    aliases = ('analyze.word_count',)\n    def transform(self, table):\n        return table\n"},
        "a = tessera_mylab.alias", ["alias 'analyze.word_count' of tessera_mylab.alias.A",
                                    "also the name or an alias of operators.analyze.word_count.WordCounter",
                                    "(built-in); drop it from A.aliases, or give it another"]),
    # the contract calls transform(table): said when the plugin loads, not after the steps before it have run
    "run instead of transform": (
        {"run": "from operators.base import Operator\n\nclass R(Operator):\n    name = 'mylab.r'\n"
                "    def run(self, table):\n        return table\n"},
        "r = tessera_mylab.run", ["tessera_mylab.run.R (mylab.r): it does not implement transform(self, table) "
                                  "(it defines run())"]),
    # a newcomer's slips: each named, not "defines no operator" alone, nor a method the engine never calls
    "a named class without the Operator base": (
        {"nobase": "class K:\n    name = 'mylab.k'\n    def transform(self, table):\n        return table\n"},
        "k = tessera_mylab.nobase", ["defines no Operator subclass with a name; K has a name but does not subclass "
                                     "operators.base.Operator"]),
    "an operator written on BaseModel": (
        {"onmodel": "from pydantic import BaseModel\n\nclass K(BaseModel):\n    name = 'mylab.k'\n"},
        "k = tessera_mylab.onmodel", ["failed to import: A non-annotated attribute was detected: `name = 'mylab.k'`: "
                                      "an operator class subclasses operators.base.Operator, not BaseModel"]),
    "an Operator without a name in a module": (
        {"nameless": "from operators.base import Operator\n\nclass K(Operator):\n"
                     "    def transform(self, table):\n        return table\n"},
        "k = tessera_mylab.nameless", ["; K subclasses Operator but sets no name = 'category.snake_name'"]),
    "produce instead of produces": (
        {"produce": "from operators.base import Operator\n\nclass K(Operator):\n    name = 'mylab.k'\n"
                    "    def produce(self):\n        return {'flag': 'chip'}\n"
                    "    def transform(self, table):\n        return table\n"},
        "k = tessera_mylab.produce", ["K (mylab.k): it defines produce(), which no executor calls; did you mean "
                                      "produces()?"]),
    "transfrom instead of transform": (
        {"transfrom": "from operators.base import Operator\n\nclass K(Operator):\n    name = 'mylab.k'\n"
                      "    def transfrom(self, table):\n        return table\n"},
        "k = tessera_mylab.transfrom", ["it defines transfrom(), which no executor calls; did you mean transform()?"]),
    "transform without the table": (
        {"t0": "from operators.base import Operator\n\nclass T(Operator):\n    name = 'mylab.t'\n"
               "    def transform(self):\n        return None\n"},
        "t = tessera_mylab.t0", ["T (mylab.t): transform(self) must take one argument besides self"]),
    "transform with two arguments": (
        {"t2": "from operators.base import Operator\n\nclass T(Operator):\n    name = 'mylab.t'\n"
               "    def transform(self, table, extra):\n        return table\n"},
        "t = tessera_mylab.t2", ["transform(self, table, extra) must take one argument besides self"]),
    "a scope that is none": (
        {"rows": "from operators.base import Operator\n\nclass R(Operator):\n    name = 'mylab.r'\n"
                 "    scope = 'rows'\n    def transform(self, table):\n        return table\n"},
        "r = tessera_mylab.rows", ["tessera_mylab.rows.R (mylab.r): scope 'rows' is not one of row, query, corpus, "
                                   "source; did you mean 'row'?"]),
    "a scope that is no text": (
        {"nos": "from operators.base import Operator\n\nclass N(Operator):\n    name = 'mylab.n'\n"
                "    scope = None\n    def transform(self, table):\n        return table\n"},
        "n = tessera_mylab.nos", ["N (mylab.n): scope None is not one of row, query, corpus, source"]),
    "source without read": (
        {"src": "from operators.base import Source\n\nclass S(Source):\n    name = 'mylab.s'\n"},
        "s = tessera_mylab.src", ["S (mylab.s): it does not implement read(self, split)"]),
    # a Params or a hint the engine cannot use: said when the plugin loads, not as an AttributeError or a TypeError
    # from the spec's build or the batching, naming no step
    "params without BaseModel": (
        {"p": "from operators.base import Operator\n\nclass P(Operator):\n    name = 'mylab.p'\n"
              "    class Params:\n        keyword: str = 'honey'\n"
              "    def transform(self, table):\n        return table\n"},
        "p = tessera_mylab.p", ["P (mylab.p): Params is tessera_mylab.p.P.Params (a class), not a pydantic model: "
                                "write class Params(BaseModel)"]),
    "a reranker's params not extending RerankParams": (
        {"rr": "from pydantic import BaseModel\nfrom operators.rerank.base import Reranker\n\n"
               "class B(Reranker):\n    name = 'mylab.boost'\n    class Params(BaseModel):\n        word: str = 'x'\n"
               "    def score_texts(self, query, texts):\n        return [0.0] * len(texts)\n"},
        "b = tessera_mylab.rr", ["B (mylab.boost): Params does not extend RerankParams, the Params of its base "
                                 "Reranker, whose fields the base reads: write class Params(RerankParams)"]),
    # a param JSON cannot describe: tessera ops and the service's listing failed as an internal error naming no
    # operator, for every operator
    "a callable param": (
        {"fn": "from typing import Callable, Optional\nfrom pydantic import BaseModel, Field\n"
               "from operators.base import Operator\n\nclass F(Operator):\n    name = 'mylab.f'\n"
               "    class Params(BaseModel):\n        fn: Optional[Callable] = Field(None, description='A function.')\n"
               "    def transform(self, table):\n        return table\n"},
        "f = tessera_mylab.fn", ["F (mylab.f): Params field 'fn' has a type JSON cannot describe (Optional[Callable]): "
                                 "a step's params come from JSON or YAML, and tessera ops lists them from their JSON "
                                 "schema; take a name or a value (text, number, list, dict) and build the object in "
                                 "setup()"]),
    "an object param": (
        {"obj": "from pydantic import BaseModel, ConfigDict, Field\nfrom operators.base import Operator\n\n"
                "class Model:\n    pass\n\nclass O(Operator):\n    name = 'mylab.o'\n    class Params(BaseModel):\n"
                "        model_config = ConfigDict(arbitrary_types_allowed=True)\n"
                "        model: Model = Field(None, description='A model.')\n"
                "    def transform(self, table):\n        return table\n"},
        "o = tessera_mylab.obj", ["O (mylab.o): Params field 'model' has a type JSON cannot describe (Model)"]),
    "a batch size that is no whole number": (
        {"bs": "from operators.base import Operator\n\nclass B(Operator):\n    name = 'mylab.b'\n"
               "    batch_size = 2.5\n    def transform(self, table):\n        return table\n"},
        "b = tessera_mylab.bs", ["B (mylab.b): batch_size = 2.5: it takes a whole number above 0, or None"]),
    "a gpu hint that is text": (
        {"gpu": "from operators.base import Operator\n\nclass G(Operator):\n    name = 'mylab.g'\n"
                "    num_gpus = '1'\n    def transform(self, table):\n        return table\n"},
        "g = tessera_mylab.gpu", ["G (mylab.g): num_gpus = '1': it takes a number, 0 or more"]),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_entry_point_is_an_error_naming_it(plugin_root, case):
    modules, entry_point, needles = BROKEN[case]
    write_package(plugin_root, modules)
    write_dist_info(plugin_root, entry_point)
    with pytest.raises(OperatorPluginError) as err:
        all_operators()
    message = str(err.value)
    assert "\n" not in message and all(n in message for n in needles), message
    with pytest.raises(OperatorPluginError):  # every lookup says it again, and nothing half-registered stays
        get_operator("analyze.word_count")
    assert registry._registry == {}


def test_two_plugins_with_one_name_are_an_error_naming_both(plugin_root, monkeypatch):
    write_package(plugin_root, {"copy": FLAGS.replace("class KeywordFlagger", "class OtherFlagger")})
    write_dist_info(plugin_root, f"mylab = {PACKAGE}.flags")
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.copy")
    with pytest.raises(OperatorPluginError, match=r"'mylab.keyword_flag' is used by both tessera_mylab.flags."
                       r"KeywordFlagger \(entry point .*\) and tessera_mylab.copy.OtherFlagger "
                       r"\(TESSERA_OPERATORS module 'tessera_mylab.copy'\); give one of them another name$"):
        all_operators()


def test_a_missing_tessera_operators_module_is_one_line_from_the_cli(plugin_root, tmp_path, monkeypatch, capsys,
                                                                      caplog):
    """``tessera ops`` in this process (``tessera_in_process``: the test's fresh registry, the plugin on ``sys.path``),
    with nothing logged at WARNING or above, which a process of its own would print on stderr besides the line; the
    script in a process of its own finds a plugin in test_tessera_ops_lists_the_plugin_and_tessera_run_runs_it."""
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags,{PACKAGE}.nope")
    proc = tessera_in_process(monkeypatch, capsys, "ops", home=tmp_path / "home", check=None)
    assert_one_line_error(proc, "operator plugin TESSERA_OPERATORS module 'tessera_mylab.nope' failed to import",
                          "No module named 'tessera_mylab.nope'")
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- the contract test, on the plugin, from what the package ships -------------------------------------------

class TestKeywordFlaggerContract(OperatorContract):
    """The shipped mixin against the outside operator, with the repository's data/ folder out of reach."""

    operator_name = "mylab.keyword_flag"

    @pytest.fixture(autouse=True)
    def _registered(self, plugin_root, monkeypatch, tmp_path):
        monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
        monkeypatch.setattr(testing, "SAMPLE_CORPUS", tmp_path / "no-checkout" / "corpus.jsonl")


def test_the_shipped_sample_documents_are_the_head_of_the_sample_corpus():
    shipped = testing.SAMPLE_DOCUMENTS.read_text(encoding="utf-8").splitlines()
    corpus = testing.SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()
    assert len(shipped) == testing.SAMPLE_DOCUMENTS_COUNT and shipped == corpus[:len(shipped)]
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert testing.SAMPLE_DOCUMENTS.name in package_data["package-data"]["operators"]
    assert sample_documents(41).column("docno").to_pylist()[:40] == sample_documents(40).column("docno").to_pylist()


def test_more_sample_documents_than_shipped_need_a_checkout(monkeypatch, tmp_path):
    monkeypatch.setattr(testing, "SAMPLE_CORPUS", tmp_path / "corpus.jsonl")
    assert sample_documents(40).num_rows == 40
    with pytest.raises(FileNotFoundError, match="ships 40 sample documents"):
        sample_documents(41)


def test_looking_up_operators_while_another_thread_imports_never_fails():
    """The service looks operators up on request threads while others import: reading ``sys.modules`` as it changed
    failed a request with "dictionary changed size during iteration" (a 500 of GET /v1/models/NAME, in CI)."""
    import threading
    import time
    import types

    from operators import plugins

    stop, errors = threading.Event(), []

    def imports() -> None:  # modules come and go, twenty at a time, as imports and test teardowns do
        names = [f"_tessera_thread_probe_{k}" for k in range(20)]
        while not stop.is_set():
            for name in names:
                sys.modules[name] = types.ModuleType(name)
            for name in names:
                sys.modules.pop(name, None)

    def lookups() -> None:
        try:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                plugins.remember_stamps()
        except RuntimeError as err:
            errors.append(err)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the old code failed within the half second
    try:
        importer, looker = threading.Thread(target=imports), threading.Thread(target=lookups)
        importer.start()
        looker.start()
        looker.join()
    finally:
        stop.set()
        importer.join()
        sys.setswitchinterval(interval)
    assert errors == []


def test_the_methods_a_misspelling_is_checked_against_are_the_contracts():
    """A contract method renamed in ``operators.base`` would leave its typos unchecked without a word."""
    from operators.base import Source
    from operators.plugins import _CONTRACT_METHODS

    assert all(callable(getattr(Source, m, None)) for m in _CONTRACT_METHODS)
