"""``tessera flows save`` keeps a saved flow from being lost to a name used twice, and refuses a file's name as a
flow's. Through flows.commands.main, in a TESSERA_HOME of the test's own."""

from __future__ import annotations

import json

import pytest

from flows.commands import main

BM25 = "steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n"
OTHER = "steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 5}}\n"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_saved_flow_is_replaced_only_with_force(home, tmp_path, capsys):
    first, other = tmp_path / "first.yaml", tmp_path / "other.yaml"
    first.write_text(BM25)
    other.write_text(OTHER)
    assert main(["flows", "save", "mine", str(first)]) == 0
    assert "saved flow 'mine'" in capsys.readouterr().out
    assert main(["flows", "save", "mine", str(first)]) == 0  # the same spec again: nothing is lost
    assert main(["flows", "save", "mine", str(other)]) == 2  # silently replaced before
    err = capsys.readouterr().err
    assert "field 'NAME'" in err and "a saved flow named 'mine' exists" in err and "--force" in err, err
    assert "k: 3" in (home / "flows" / "mine.yaml").read_text()
    assert main(["flows", "save", "mine", str(other), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replaced"] is True
    assert "k: 5" in (home / "flows" / "mine.yaml").read_text()


@pytest.mark.parametrize("name", ["mine.yaml", "hybrid.yml", "x.JSON"])
def test_a_files_name_is_not_a_flows_name(home, tmp_path, capsys, name):
    spec = tmp_path / "spec.yaml"
    spec.write_text(BM25)
    assert main(["flows", "save", name, str(spec)]) == 2  # stored as mine.yaml.yaml before, run as 'mine.yaml'
    err = capsys.readouterr().err
    assert "is a file's name, not a flow's" in err and f"save it as '{name.rsplit('.', 1)[0]}'" in err, err
    assert not (home / "flows").exists() or not list((home / "flows").iterdir())



def test_flow_save_in_python_replaces_another_spec_only_with_force(home):
    from flows.api import Flow
    from operators.errors import SpecError

    Flow.load("bm25").save("mine")
    Flow.load("bm25").save("mine")  # the same spec again
    with pytest.raises(SpecError, match="a saved flow named 'mine' exists"):
        Flow.load("hybrid").save("mine")
    assert "retrieve.dense" not in (home / "flows" / "mine.yaml").read_text()
    Flow.load("hybrid").save("mine", force=True)
    assert "retrieve.dense" in (home / "flows" / "mine.yaml").read_text()


@pytest.mark.parametrize("name, said", [(None, "NoneType None is not a valid flow name"),
                                        (3, "int 3 is not a valid flow name"),
                                        ("my flow", "'my flow' is not a valid flow name")])
def test_a_name_that_is_not_text_is_named_by_its_type(home, name, said):
    """``save(None)`` said "'None' is not a valid flow name", as if the text 'None' had been given."""
    from flows.api import Flow
    from operators.errors import SpecError

    with pytest.raises(SpecError, match=said):
        Flow.load("bm25").save(name)


def test_a_name_too_long_is_said_to_be_so_and_not_echoed_whole(home):
    """A 101-character name was "not a valid flow name (letters, digits, ...)", which it is made of, and a name of
    100,000 characters came back whole in the message."""
    from flows.api import Flow
    from operators.errors import SpecError

    Flow.load("bm25").save("n" * 100)  # the longest taken
    for length in (101, 100_000):
        with pytest.raises(SpecError) as err:
            Flow.load("bm25").save("n" * length)
        assert f"at most 100 characters; this one has {length:,})" in err.value.message
        assert len(err.value.message) < 300


def test_a_flow_whose_index_settings_no_index_takes_is_not_saved(home, tmp_path, capsys):
    """A misspelt key of index_settings was saved, listed without an error, and refused only by the benchmark
    that built the index, with pydantic's bare 'Extra inputs are not permitted'."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("index_settings: {encodr: all-MiniLM-L6-v2}\n" + BM25)
    assert main(["flows", "save", "enc", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "field 'index_settings.encodr'" in err, err
    assert "unknown index setting 'encodr'; did you mean 'encoder'?" in err, err
    spec.write_text("index_settings: {dense_type: hnws, stemmer: porter}\n" + BM25)
    assert main(["flows", "save", "enc", str(spec)]) == 2
    assert f"field 'index_settings.dense_type': {spec}, line 1: must be 'flat'" in capsys.readouterr().err
    spec.write_text("index_settings: {stopwords: no}\n" + BM25)  # Norwegian's code, read by YAML as false
    assert main(["flows", "save", "enc", str(spec)]) == 2
    assert f"field 'index_settings.stopwords': {spec}, line 1: must be a string or a list of strings (got false); " \
        "YAML reads unquoted no" in capsys.readouterr().err
    assert not (home / "flows").exists() or not list((home / "flows").iterdir())


def test_a_folder_given_as_the_spec_file_is_named_as_a_folder(home, tmp_path, capsys):
    specs = tmp_path / "specs.yaml"
    specs.mkdir()
    assert main(["flows", "save", "mine", str(specs)]) == 2  # "spec file not found" before, of a folder that is there
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"tessera: error: field 'FILE': '{specs}' is a folder, not a spec file: give the YAML or JSON file in it"], err
    assert not (home / "flows").exists() or not list((home / "flows").iterdir())


def test_standard_input_is_read_as_the_specs_text_never_as_a_flow_name_or_a_path(home, tmp_path, capsys,
                                                                                  monkeypatch):
    """``printf 'steps: ...' | tessera flows save NAME -``: one line without its newline was looked up as a flow's
    name ("no flow ... named 'steps: ...'"), ``printf hybrid`` saved the built-in hybrid flow, and an empty input
    was "the flow name is empty"."""
    import io

    def save(name: str, text: str) -> tuple[int, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        capsys.readouterr()
        return main(["flows", "save", name, "-"]), capsys.readouterr().err

    assert save("mine", BM25.strip()) == (0, "")
    assert "params:\n      k: 3" in (home / "flows" / "mine.yaml").read_text()
    (tmp_path / "spec.yaml").write_text(OTHER)
    monkeypatch.chdir(tmp_path)
    for text, said in [("hybrid", "a flow spec must be a mapping (with its 'steps'), got a string ('hybrid')"),
                       ("spec.yaml", "a flow spec must be a mapping (with its 'steps'), got a string ('spec.yaml')"),
                       ("", "the spec is empty: a flow spec is a mapping with its 'steps'")]:
        status, err = save("other", text)
        assert status == 2 and err.strip().splitlines() == [f"tessera: error: field 'FILE': {said}"], err
    assert sorted(p.name for p in (home / "flows").iterdir()) == ["mine.yaml"]


def test_a_training_recipes_name_is_not_a_saved_flows(home, tmp_path, capsys):
    """``tessera flows save train FILE`` saved a flow that ``flows list`` listed beside the recipe ``train``:
    ``flows show train`` then showed the flow, and ``tessera train --spec train`` used the recipe."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(BM25)
    assert main(["flows", "save", "train", str(spec)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tessera: error: field 'NAME': 'train' is a built-in training recipe; save under another name"]
    assert not (home / "flows").exists() or not list((home / "flows").iterdir())
