"""Reading a spec: the one place where flow specs (and training recipes) are read from YAML or JSON.

A source is a file path, the name of a built-in flow (``flows/specs/NAME.yaml``), the
name of a saved flow (``$TESSERA_HOME/flows/NAME.yaml``), or YAML/JSON text. Names
resolve in that order everywhere a flow is accepted.

Specs come from users and, through the service, from the network, so the reader is
strict where PyYAML is lenient: a key given twice in one mapping is an error (YAML and
JSON both keep the last one silently), nesting deeper than ``MAX_DEPTH`` is an error,
and so is a document whose aliases expand to more than ``MAX_VALUES`` values (a
"billion laughs" spec is a few hundred bytes that expand exponentially).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flows import store
from operators.errors import SpecError, one_line
from operators.json_tree import spec_kind
from operators.yaml_text import DaysAsWritten, syntax_hint

#: Most values a spec may expand to, aliases followed (a large flow has a few thousand).
MAX_VALUES = 100_000
#: Deepest nesting of mappings and lists in a spec (a flow needs about six levels).
MAX_DEPTH = 64
#: Suffixes that make a spec source a file path, not a flow name.
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def resolve_spec_path(source: str | Path) -> Path | None:
    """A spec file path, the built-in ``flows/specs/<name>.{yaml,yml,json}``, or the saved flow
    ``$TESSERA_HOME/flows/<name>.yaml``; None if none of them."""
    if "\n" in str(source):
        return None
    try:  # YAML/JSON text on one line can be too long to be a file name
        path = Path(source)
        if path.is_file():
            return path
        if str(source).startswith("~") and path.expanduser().is_file():  # Flow.load("~/flow.yaml") in Python
            return path.expanduser()
        builtin = store.builtin_path(str(source))
        if builtin is not None:
            return builtin
    except (OSError, RuntimeError):  # RuntimeError: ~word, no user's
        return None
    return store.saved_path(str(source))


def read_mapping(source: str | Path) -> tuple[dict[str, Any], Path | None]:
    """The mapping a spec source holds, and its file (None for text)."""
    if isinstance(source, str) and not source.strip():  # Path("") is ".", which looked for a flow named ''
        raise SpecError("the flow name is empty: give a flow's name, a spec file or YAML/JSON text", field="spec")
    path = resolve_spec_path(source)
    if path is not None:
        text = read_text(path)
        if path.suffix.lower() == ".json":
            return load_json(text, origin=str(path)), path
        return load_yaml(text, origin=str(path)), path
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{")):
        return load_yaml(source), None
    text = str(source)
    if "/" in text or "\\" in text or text.lower().endswith(SPEC_SUFFIXES):
        if Path(text).is_dir():  # a plugin's folder, say: there, but not a spec
            raise SpecError(f"'{text}' is a folder, not a spec file: give the YAML or JSON file in it", field="spec")
        raise SpecError(f"spec file '{text}' does not exist", field="spec")
    if text in store.recipe_names():  # `tessera flows list` lists it, as a recipe
        raise SpecError(f"'{text}' is a training recipe, not a flow to run: train with it by tessera train --spec "
                        f"{text} (tessera flows show {text} shows it)", field="spec")
    missing = f"no flow spec file or built-in flow named '{text}', and no saved flow by that name"
    if hint := store.did_you_mean(text, [*store.builtin_names(), *store.saved_names()]):
        raise SpecError(f"{missing}{hint} (tessera flows list shows them all)", field="spec")
    known = ", ".join(store.builtin_names()) or "none"
    saved = ", ".join(store.saved_names()) or "none"
    raise SpecError(f"{missing}; built-in flows: {known}; saved flows: {saved}", field="spec")


def load_json(text: str, *, origin: str | None = None) -> dict[str, Any]:
    """A ``.json`` spec file read as JSON, strictly: YAML would accept a trailing comma or comments that JSON
    does not. Errors give the line and column; a key given twice is refused, as in YAML."""
    where = f"{origin}: " if origin else ""
    if "\x00" in text:
        raise SpecError(f"{where}not a spec (the text holds NUL bytes)", field="spec")
    if not text.strip():
        raise _empty(where, text)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        comma = text[:err.pos].rstrip().endswith(",") and text[err.pos:err.pos + 1] in "}]"  # YAML's habit, not JSON's
        raise _syntax_error(where, "JSON", err.msg, err.lineno, err.colno,
                            hint="; JSON allows no comma before '}' or ']'" if comma else "") from None
    except RecursionError:
        raise SpecError(f"{where}nested more than {MAX_DEPTH} levels deep", field="spec") from None
    except _DuplicateKey as err:  # said as YAML says it: where the key is in the spec, and its lines
        raise _json_duplicate(text, where, err.key) from None
    if nesting_depth(data) > MAX_DEPTH:
        raise SpecError(f"{where}nested more than {MAX_DEPTH} levels deep", field="spec")
    if not isinstance(data, dict):
        raise not_a_mapping(data, where)
    return data


def not_a_mapping(data: Any, where: str = "") -> SpecError:
    """A spec that parsed to something other than a mapping, named in a spec's words (``spec_kind``), with the value
    when it is one: a YAML ``~`` or ``null`` is "null", not Python's ``NoneType``."""
    shown = (f" ('{one_line(data, 60)}')" if isinstance(data, str) else
             f" ({data!r})" if isinstance(data, (int, float)) and not isinstance(data, bool) else "")
    return SpecError(f"{where}a flow spec must be a mapping (with its 'steps'), got {spec_kind(data)}{shown}",
                     field="spec")


def _syntax_error(where: str, kind: str, problem: str, line: int, column: int, *, context: str = "",
                  hint: str = "") -> SpecError:
    """A spec's syntax error, the same for JSON and YAML: the problem, then where it is (1-based)."""
    return SpecError(f"{where}not valid {kind}: {problem} (line {line}, column {column}{context}){hint}", field="spec")


def _empty(where: str, text: str) -> SpecError:
    """A file (or text) with no spec in it: said as such, not as a spec that is not a mapping (of ``None``)."""
    what = "the file is empty" if where else "the spec is empty"
    only = " (it holds only comments)" if text.strip() else ""
    return SpecError(f"{where}{what}{only}: a flow spec is a mapping with its 'steps'", field="spec")


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _json_duplicate(text: str, where: str, key: str) -> SpecError:
    """A JSON spec's key given twice, with its place in the spec and its lines: JSON's reader knows neither, and JSON
    text is YAML, whose reader (``load_yaml``) says both (its tabs as spaces: YAML refuses a tab before a token, and
    JSON allows one only between tokens)."""
    try:
        load_yaml(text.replace("\t", " "))
    except SpecError as err:
        if "is given twice" in err.message:
            return spec_file_error(f"{where}{err.message}", err.field)
    return spec_file_error(f"{where}the key '{one_line(key, 200)}' is given twice in one object; JSON readers would "
                           "silently keep the last", "spec")


def spec_file_error(message: str, field: str | None) -> SpecError:
    """A problem of a spec's text. Its field is the spec's own (``spec``, or a key's place in it: ``name``,
    ``steps.bm25.params.k``), never a command's option of the same name: a key ``name`` given twice was said as
    ``tessera flows save``'s ``NAME``, and a recipe's ``split`` as ``tessera train --split``."""
    err = SpecError(message, field=field)
    err.in_spec = True
    return err


def nesting_depth(data: Any) -> int:
    """How deeply mappings and lists nest (iteratively: the input is untrusted; the service's check of a step's
    params uses it too)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return deepest


def read_text(path: Path) -> str:
    """A spec file's text; a file that is not UTF-8 text is a ``SpecError`` naming it. A byte order mark (an editor
    on Windows writes one) is dropped, as YAML drops it: JSON would refuse the file for it."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:  # Notepad's Windows-1252: where, and how to convert it
        from operators.sources.encoding import not_utf8_at, save_as_utf8

        raise SpecError(f"{path}: not a spec (the file is not UTF-8 text: {not_utf8_at(err)}); "
                        f"{save_as_utf8(err.object)}", field="spec") from None
    except OSError as err:
        raise SpecError(f"{path}: cannot read the spec ({err.strerror or err})", field="spec") from None


def load_yaml(text: str, *, origin: str | None = None) -> dict[str, Any]:
    """A spec's YAML or JSON text as a mapping; anything else is a ``SpecError``."""
    where = f"{origin}: " if origin else ""
    if "\x00" in text:
        raise SpecError(f"{where}not a spec (the text holds NUL bytes)", field="spec")
    loader = _SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_size(node, where)
            loader.places = _mapping_places(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        raise _yaml_error(where, err) from None
    except SpecError as err:
        raise spec_file_error(f"{where}{err.message}", err.field) from None
    finally:
        loader.dispose()
    if node is None:  # no document: an empty file, or one of comments
        raise _empty(where, text)
    if not isinstance(data, dict):
        raise not_a_mapping(data, where)
    return data


def _yaml_error(where: str, err: yaml.YAMLError) -> SpecError:
    """PyYAML's error as a JSON one is said: the problem and its line and column (its own text shows the marks'
    ``in "<unicode string>"`` and a snippet with a caret, on one line here), then what it was reading, and where."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or not problem:
        return SpecError(f"{where}not valid YAML/JSON: {one_line(err, 200)}{syntax_hint(err)}", field="spec")
    context, at = getattr(err, "context", None), getattr(err, "context_mark", None)
    opened = (f"; {context} at line {at.line + 1}, column {at.column + 1}"
              if context and at is not None and (at.line, at.column) != (mark.line, mark.column) else "")
    return _syntax_error(where, "YAML/JSON", one_line(problem, 160), mark.line + 1, mark.column + 1,
                         context=opened, hint=syntax_hint(err))


class _SpecLoader(DaysAsWritten):
    """PyYAML's safe loader, refusing duplicate keys and deep nesting (a date that names no day is its text)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self.places: dict[int, tuple[str, ...]] = {}  # each mapping node's keys from the top (``_mapping_places``)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise SpecError(f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1})", field="spec")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, ScalarNode):
                continue  # `<<` merges may be overridden on purpose
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:  # its field is the key's place in the spec (steps.bm25.params.k), not the key alone
                place = ".".join([*self.places.get(id(node), ()), str(key)[:100]])
                lines = f"both on line {line}" if seen[key] == line else f"lines {seen[key]} and {line}"
                raise SpecError(f"the key '{one_line(key, 200)}' is given twice in one mapping ({lines}); YAML and "
                                "JSON would silently keep the last", field=place)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _mapping_places(root: Node) -> dict[int, tuple[str, ...]]:
    """Each mapping node's place in the document, by ``id``: the keys (and list positions) that lead to it from the
    top, the first in the file for one an alias reuses. Walked once per node (``_check_size`` has refused a document
    too large or an alias that holds itself)."""
    places: dict[int, tuple[str, ...]] = {}
    seen: set[int] = set()
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, place = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            places[id(node)] = place
            pairs = [(value, (*place, str(key.value))) for key, value in node.value if isinstance(key, ScalarNode)]
            stack.extend(reversed(pairs))  # popped in the document's order
        elif isinstance(node, SequenceNode):
            stack.extend(reversed([(child, (*place, str(i))) for i, child in enumerate(node.value)]))
    return places


def _check_size(root: Node, where: str) -> None:
    """Count the values the document expands to, each alias as often as it is used."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # expanding now: met again below itself, it is a recursive alias
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in sizes:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, MappingNode)
                    else list(node.value) if isinstance(node, SequenceNode) else [])
        if not expanded:
            if id(node) in open_nodes:
                raise SpecError(f"a YAML alias refers to a value that holds it (line {node.start_mark.line + 1})",
                                field="spec")
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        open_nodes.discard(id(node))
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
        if sizes[id(node)] > MAX_VALUES:
            raise SpecError(f"the spec expands to more than {MAX_VALUES:,} values (YAML aliases used over and "
                            "over?); refused", field="spec")


