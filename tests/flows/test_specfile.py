"""Reading specs strictly: a key given twice, aliases that expand without end, nesting without end,
and files that are not text are one clear error each, never a silent choice or a crash."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from flows.specfile import MAX_DEPTH, MAX_VALUES, load_json, load_yaml, read_mapping
from operators.errors import ParamsError, SpecError


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as err:
        load_yaml(text)
    return err.value


def test_a_key_given_twice_is_an_error_naming_it_in_yaml_and_json():
    """Its field is the key's place in the spec (it was the key alone: ``k``, which a command took for its option)."""
    err = spec_error("steps:\n  top: {op: postprocess.reduce}\n  top: {op: analyze.word_count}\n")
    assert err.field == "steps.top" and "'top' is given twice" in err.message and "lines 2 and 3" in err.message
    err = spec_error('{"steps": {"t": {"op": "postprocess.reduce", "params": {"k": 10, "k": 3}}}}')
    assert err.field == "steps.t.params.k" and "'k' is given twice" in err.message
    err = spec_error("a: &a {x: 1}\nsteps:\n  - *a\n  - {op: p, params: {k: 1, k: 2}}\n")
    assert err.field == "steps.1.params.k", err.field


@pytest.mark.parametrize(("text", "field", "lines"), [
    ("name: x\nname: y\nsteps: {}\n", "name", "lines 1 and 2"),
    ("steps:\n  bm25: {op: retrieve.bm25, params: {k: 5, k: 6}}\n", "steps.bm25.params.k", "both on line 2"),
    ('{"name": "x",\t"steps": {"t": {"op": "p", "params": {"index": "a",\n "index": "b"}}}}',
     "steps.t.params.index", "lines 1 and 2"),
])
def test_a_spec_files_key_given_twice_is_named_as_the_specs_not_as_an_option(tmp_path, capsys, text, field, lines):
    """``name:`` twice was ``field 'NAME'`` (``flows save``'s argument) and ``index:`` twice ``field 'index'``; a
    JSON file's said neither the key's place nor its lines."""
    from flows.commands import main

    spec = tmp_path / ("twice.json" if text.startswith("{") else "twice.yaml")
    spec.write_text(text, encoding="utf-8")
    assert main(["flows", "save", "mine", str(spec)]) == 2
    assert f"field '{field}': {spec}: the key '{field.rsplit('.', 1)[-1]}' is given twice in one mapping ({lines})" \
        in capsys.readouterr().err


def test_merge_keys_may_still_be_overridden():
    assert load_yaml("base: &b {k: 1, x: 2}\nstep:\n  <<: *b\n  k: 3\n")["step"] == {"k": 3, "x": 2}


def test_an_alias_bomb_is_refused_before_it_expands():
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):  # 9 ** 9 values if expanded: far more than memory holds
        levels.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    err = spec_error("\n".join(levels) + "\nsteps: {x: {op: analyze.word_count}}\n")
    assert err.field == "spec" and f"more than {MAX_VALUES:,} values" in err.message
    assert len(str(err)) < 300  # the error does not echo what it refused
    assert load_yaml("a: &a [1, 2]\nb: [*a, *a]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}  # modest aliases are fine


def test_a_recursive_alias_and_deep_nesting_are_errors_not_crashes():
    assert "refers to a value that holds it" in spec_error("a: &a {b: *a}\n").message
    err = spec_error("steps: " + "[" * 20_000 + "]" * 20_000 + "\n")
    assert f"more than {MAX_DEPTH} levels" in err.message
    assert load_yaml("a: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))  # as deep as allowed


def test_files_that_are_not_text_are_one_error_naming_them(tmp_path):
    binary = tmp_path / "spec.yaml"
    binary.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(SpecError, match="not a spec .the file is not UTF-8 text.") as err:
        read_mapping(binary)
    assert str(binary) in str(err.value)
    nul = tmp_path / "nul.yaml"
    nul.write_text("steps:\x00 {}\n")
    with pytest.raises(SpecError, match="NUL bytes"):
        FlowSpec.load(nul)


def test_a_flow_with_many_steps_is_ordered_and_one_with_too_many_is_refused():
    from flows.spec import MAX_STEPS

    n = MAX_STEPS  # a chain written backwards: each step reads the one written after it
    steps = {f"s{i}": {"op": "analyze.word_count", "inputs": [f"s{i + 1}"] if i < n - 1 else []} for i in range(n)}
    flow = FlowSpec.parse({"steps": steps}).build()
    assert flow.order == [f"s{i}" for i in reversed(range(n))]
    with pytest.raises(SpecError, match=f"at most {MAX_STEPS:,} steps"):
        FlowSpec.parse({"steps": {f"s{i}": {"op": "analyze.word_count"} for i in range(n + 1)}})


def test_a_json_file_is_read_as_json_with_the_line_and_column_of_a_mistake(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"steps": {"bm25": {"op": "retrieve.bm25",}}}', encoding="utf-8")  # YAML would accept it
    with pytest.raises(SpecError) as err:
        read_mapping(str(path))
    assert err.value.message.startswith(f"{path}: not valid JSON") and "line 1, column 43" in err.value.message
    path.write_text('{"steps": {"t": {"op": "postprocess.reduce", "params": {"k": 10, "k": 3}}}}', encoding="utf-8")
    with pytest.raises(SpecError, match="'k' is given twice"):
        read_mapping(str(path))
    path.write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), encoding="utf-8")
    with pytest.raises(SpecError, match="nested more than"):
        read_mapping(str(path))
    path.write_text('{"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}', encoding="utf-8")
    assert FlowSpec.load(path).steps["bm25"].params == {"k": 3}


@pytest.mark.parametrize("source", ["/tmp/no/such/flow.yaml", "missing.yml", "missing.json", "dir/flow"])
def test_a_missing_file_is_named_as_a_file(source):
    with pytest.raises(SpecError) as err:
        read_mapping(source)
    assert err.value.message == f"spec file '{source}' does not exist"


@pytest.mark.parametrize("typo, meant", [("hybrd", "hybrid"), ("rag_multhop", "rag_multihop"), ("bm52", "bm25"),
                                         ("rga", "rag")])
def test_a_misspelt_flow_name_suggests_the_close_ones(typo, meant):
    """Only the names a typo is close to: ``hybrd`` was also offered ``hybrid_ft`` and ``hybrid_ce``."""
    with pytest.raises(SpecError) as err:
        read_mapping(typo)
    assert f"did you mean '{meant}'? (" in err.value.message and "built-in flows:" not in err.value.message


@pytest.mark.parametrize("name", ["zzzz", "mine"])
def test_a_name_close_to_no_flow_lists_them_with_no_guess(name):
    """difflib's ratio of ``mine`` and ``ingest`` is 0.6, its default cutoff: "did you mean 'ingest'?" before."""
    with pytest.raises(SpecError, match="built-in flows: .*hybrid") as err:
        read_mapping(name)
    assert "did you mean" not in err.value.message, err.value.message


@pytest.mark.parametrize("name", ["train", "train_long"])
def test_a_training_recipes_name_is_refused_as_a_recipe_not_as_a_name_found_nowhere(name, tmp_path, monkeypatch):
    """``tessera flows list`` lists the recipes; ``tessera run train`` said no flow was named 'train'."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    with pytest.raises(SpecError) as err:
        read_mapping(name)
    assert err.value.message == (f"'{name}' is a training recipe, not a flow to run: train with it by tessera train "
                                 f"--spec {name} (tessera flows show {name} shows it)")
    saved = tmp_path / "home" / "flows" / f"{name}.yaml"  # a saved flow of that name is still the flow it names
    saved.parent.mkdir(parents=True)
    saved.write_text("steps:\n  bm25: {op: retrieve.corpus_bm25}\n")
    assert read_mapping(name) == ({"steps": {"bm25": {"op": "retrieve.corpus_bm25"}}}, saved)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_spec_file_with_a_byte_order_mark_reads_as_without(tmp_path, suffix):
    """Editors on Windows write a UTF-8 byte order mark; YAML dropped it, JSON refused the file for it."""
    path = tmp_path / f"flow{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}')
    assert FlowSpec.load(path).steps["bm25"].params == {"k": 3}


@pytest.mark.parametrize("text", ["steps:\n\tbm25: {op: retrieve.bm25}\n", "steps:\n  bm25:\t{op: retrieve.bm25}\n"])
def test_a_tab_in_yaml_is_named_as_a_tab(text):
    err = spec_error(text)
    assert "line 2" in err.message and err.message.endswith("YAML indents with spaces, not tabs: replace the tab "
                                                            "with spaces")


@pytest.mark.parametrize("name, text, said", [
    ("empty.yaml", "", "the file is empty"), ("blank.yml", "\n  \n", "the file is empty"),
    ("comments.yaml", "# steps: to come\n", "the file is empty (it holds only comments)"),
    ("empty.json", "", "the file is empty"),
])
def test_an_empty_spec_file_is_said_to_be_empty(tmp_path, name, text, said):
    """``tessera run empty.yaml`` said "a flow spec must be a mapping, got NoneType"."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path)
    assert err.value.message.startswith(f"{path}: {said}: a flow spec is a mapping") and err.value.field == "spec"
    assert "NoneType" not in err.value.message


@pytest.mark.parametrize("text, got", [
    ("null\n", "got null"), ("~\n", "got null"), ("- bm25\n- dense\n", "got a list"),
    ("3\n", "got a number (3)"), ("yes\n", "got true/false"),
    ('"bm25 then dense"\n', "got a string ('bm25 then dense')"),
])
def test_a_spec_that_is_no_mapping_is_named_as_written_not_as_a_python_type(tmp_path, text, got):
    """A YAML ``~`` or ``null`` document said "a flow spec must be a mapping, got NoneType"."""
    path = tmp_path / "flow.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path)
    assert err.value.message == f"{path}: a flow spec must be a mapping (with its 'steps'), {got}"
    assert err.value.field == "spec"


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_flow_name_is_said_to_be_empty_not_looked_up(name):
    """``Flow.load("")`` said "no flow spec file or built-in flow named ''" and listed all 29 flows."""
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load(name)
    assert err.value.message.startswith("the flow name is empty") and "built-in flows" not in err.value.message


@pytest.mark.parametrize("text, said", [
    ("steps:\n  bm25: {op: retrieve.bm25, params: {k: [1, 2}\n",
     "not valid YAML/JSON: expected ',' or ']', but got '}' (line 2, column 46; while parsing a flow sequence at "
     "line 2, column 41)"),
    ("steps:\n  bm25: op: retrieve.bm25\n",
     "not valid YAML/JSON: mapping values are not allowed here (line 2, column 11)"),
    ("steps:\n\tbm25: {op: retrieve.bm25}\n", "not valid YAML/JSON: found character '\\t' that cannot start any token "
     "(line 2, column 1); YAML indents with spaces, not tabs"),
])
def test_a_yaml_syntax_error_gives_the_line_and_column_as_a_json_one_does(tmp_path, text, said):
    """PyYAML's own text said ``in "<unicode string>", line 2, column 11`` and showed the line with a caret, all on
    one line; a .json file's error already gave the problem and its line and column."""
    path = tmp_path / "flow.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        read_mapping(str(path))
    assert err.value.message.startswith(f"{path}: {said}"), err.value.message
    assert "unicode string" not in err.value.message and err.value.field == "spec"


@pytest.mark.parametrize("text, hint", [
    ("steps:\n  bm25:\n    op retrieve.bm25\n    params: {k: 5}\n",
     "line 3 ('op retrieve.bm25') has no ':' after its key"),
    ("steps:\n  bm25:\n    op: retrieve.bm25\n    params\n", "line 4 ('params') has no ':' after its key"),
    ("steps:\n  bm25:\n    op:retrieve.bm25\n    params: {k: 5}\n",
     "line 3 ('op:retrieve.bm25'): put a space after a key's colon (key: value)"),
    ("steps:\n  bm25:\n    op: retrieve.bm25\n   params: {k: 5}\n",
     "line 4 does not line up with the lines above it: the keys of one mapping are indented alike, with spaces"),
    ("steps:\n  bm25:\n    op: retrieve.bm25\n      params: {k: 5}\n", "line 4 is indented more than line 3"),
    ("steps:\n  bm25: op: retrieve.bm25\n",
     "line 2 holds a value with ': ' in it: a mapping as a value goes in braces"),
])
def test_a_missing_colon_or_a_slip_of_indentation_is_said_at_its_line(text, hint):
    """PyYAML said "mapping values are not allowed here (line 4 ...)" for a colon left out on line 3, and "expected
    <block end>, but found '<block mapping start>'" for a key one space short: the line and the slip are said."""
    err = spec_error(text)
    assert f"); {hint}" in err.message and err.field == "spec", err.message


@pytest.mark.parametrize("text, field, hint", [
    ("steps:\n  bm25: {op: retrieve.bm25}\n  top:\n    op: postprocess.reduce\n  inputs: [bm25]\n", "steps.inputs",
     "got a list ['bm25']; 'inputs' is a field of a step, not a step id: indent it below its step"),
    ("steps:\n  bm25:\n    op: retrieve.bm25\n  params: {k: 5}\n", "steps.params.k",
     "'params' is a field of a step, not a step id: indent it below its step"),
    ("steps:\n  bm25:\n  op: retrieve.bm25\n", "steps.bm25",
     "got nothing (null); the line after it, 'op:', is a field of a step written as a step: indent the step's fields"),
    ("steps:\n  bm25:\n    op:retrieve.bm25\n", "steps.bm25",
     "got a string 'op:retrieve.bm25': put a space after the colon (op: retrieve.bm25)"),
    # in braces YAML reads op:retrieve.bm25 as a key of no value: said "unknown field" alone before
    ("steps:\n  bm25: {op:retrieve.bm25}\n", "steps.bm25.op:retrieve.bm25",
     "unknown field; put a space after the colon (op: retrieve.bm25): YAML reads 'op:retrieve.bm25' as one name"),
    ("steps:\n  bm25: {op: retrieve.bm25, params: {k:5}}\n", "steps.bm25.params.k:5",
     "unknown parameter; put a space after the colon (k: 5): YAML reads 'k:5' as one name"),
])
def test_a_steps_field_indented_as_a_step_says_so(tmp_path, text, field, hint):
    """A step's field one level up is a step to YAML: ``params`` was said as a step with the unknown field ``k``, and
    ``op:retrieve.bm25`` (no space) as a text to write as ``{op: op:retrieve.bm25}``."""
    path = tmp_path / "flow.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises((SpecError, ParamsError)) as err:  # a param's name is checked as the step is built
        FlowSpec.load(path).build()
    assert err.value.field == field and hint in err.value.message, err.value.message


def test_a_trailing_comma_in_a_json_spec_is_named():
    with pytest.raises(SpecError) as err:
        load_json('{"steps": {"bm25": {"op": "retrieve.bm25",}}}')
    assert err.value.message.endswith("(line 1, column 43); JSON allows no comma before '}' or ']'"), err.value.message


def test_a_top_level_key_that_only_holds_an_anchor_is_said_as_one(tmp_path):
    """``defaults: &d {k: 5}`` (a habit of compose files) said "unknown field" alone; the steps that use it run as
    written once the anchor is set on its first use."""
    path = tmp_path / "flow.yaml"
    path.write_text("defaults: &d {k: 5}\nsteps:\n  bm25: {op: retrieve.bm25, params: *d}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path)
    assert err.value.field == "defaults" and err.value.message.endswith(
        "'defaults' holds a YAML anchor the steps use: a spec has no other keys, even for that, so set the anchor "
        "(&name) where the value is first used in the steps"), err.value.message
    path.write_text("steps:\n  bm25: {op: retrieve.bm25, params: &d {k: 5}}\n  dense: {op: retrieve.dense, "
                    "params: *d, inputs: []}\n  fused: {op: fuse.rrf, inputs: [bm25, dense]}\n", encoding="utf-8")
    assert FlowSpec.load(path).steps["dense"].params == {"k": 5}


def test_a_spec_file_under_the_home_folder_is_read(tmp_path, monkeypatch):
    """``Flow.load("~/flow.yaml")`` in Python said ``spec file '~/flow.yaml' does not exist`` (the shell expands ``~``
    for ``tessera run``; Python does not)."""
    from flows.api import Flow

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "flow.yaml").write_text("name: mine\nsteps:\n  wc: {op: analyze.word_count}\n", encoding="utf-8")
    assert Flow.load("~/flow.yaml").name == "mine"
    with pytest.raises(SpecError, match="spec file '~nosuchuser9/flow.yaml' does not exist"):
        Flow.load("~nosuchuser9/flow.yaml")
