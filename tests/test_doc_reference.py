"""The reference pages say what the code has, so that they cannot drift from it unnoticed: every option of every
``tessera`` command is in docs/cli.md (and every option it names exists, with the default it states); every setting
of the service is in docs/serving.md, whose ``service:`` block gives the defaults; every error code the service emits
is on that page; every registered operator is in docs/operators.md, with the param defaults it states; and every
relative link and ``#anchor`` of README.md and docs/*.md resolves. Quick: argparse, pydantic models, the registry and
the pages' text; nothing is started."""

from __future__ import annotations

import argparse
import ast
import functools
import re
import typing
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


# -- docs/cli.md -----------------------------------------------------------------------------------------------------

def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command and subcommand's parser by its words after ``tessera``: ``run``, ``index add``..."""
    from flows.commands import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        if words:
            found[" ".join(words)] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])

    walk(build_parser(), [])
    return found


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option not in ("--help", "--debug")}


def cli_sections() -> dict[str, str]:
    """docs/cli.md's section of each command (``## `tessera run` ``)."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^## `tessera (\w+)`.*?(?=^## |\Z)", page("cli.md"),
                                                          re.S | re.M)}


def cli_synopsis() -> dict[str, str]:
    """The synopsis lines of each command, at the top of docs/cli.md."""
    synopsis = re.search(r"```text\n(.*?)```", page("cli.md"), re.S).group(1)
    lines: dict[str, str] = {}
    for command, rest in re.findall(r"^tessera (\w+)(.*(?:\n {3,}.*)*)", synopsis, re.M):
        lines[command] = lines.get(command, "") + rest
    return lines


def named(option: str, text: str) -> bool:
    return re.search(re.escape(option) + r"(?![\w-])", text) is not None


def test_every_option_of_every_command_is_in_its_section_of_cli_md():
    sections = cli_sections()
    missing = [f"tessera {words} {option}" for words, parser in command_parsers().items()
               for option in options(parser) if not named(option, sections.get(words.split()[0], ""))]
    assert not missing, f"options docs/cli.md does not describe in the command's section: {missing}"


def test_every_option_cli_md_lists_exists_with_the_default_it_states():
    sections, synopsis, parsers = cli_sections(), cli_synopsis(), command_parsers()
    wrong = [f"tessera {command}: no section in docs/cli.md" for command in synopsis if command not in sections]
    for command, text in sections.items():
        text += "\n" + synopsis.get(command, "")
        known = {option: action for words, parser in parsers.items() if words.split()[0] == command
                 for option, action in options(parser).items()}
        if command not in parsers:
            wrong.append(f"tessera {command}: no such command")
        rows = re.findall(r"^\| `(--[\w-]+)[^|]*\|(.*)$", text, re.M)  # an option table's rows
        listed = {option for option, _ in rows} | set(re.findall(r"\[(--[\w-]+)", text))  # and the synopsis' [--x]
        wrong += [f"tessera {command} {option}: no such option" for option in sorted(listed - set(known))]
        for option, meaning in rows:
            stated = re.search(r"\(default:? (?:`([^`]+)`|([^`),;]+))", meaning)
            action = known.get(option)
            if stated and action is not None and action.default not in (None, False):
                if str(action.default) != (stated.group(1) or stated.group(2)).strip():
                    wrong.append(f"tessera {command} {option}: docs say default {stated.group(0)!r}, the parser has "
                                 f"{action.default!r}")
    assert not wrong, wrong


def test_every_option_cli_md_shows_with_a_value_names_the_value_as_help_does():
    """``tessera ingest --index NAME_OR_PATH`` in the synopsis and the option tables is what ``--help`` shows: it said
    ``--index PATH`` (and ``tessera serve`` ``--index INDEX``) for an option that takes an index's name too. Options
    with choices are left to the prose (``--help`` lists the choices)."""
    parsers, sections, wrong = command_parsers(), cli_sections(), []
    for command, synopsis in cli_synopsis().items():
        shown: dict[str, set[str]] = {}
        for words, parser in parsers.items():
            if words.split()[0] == command:
                for option, action in options(parser).items():
                    if action.nargs != 0 and not action.choices:
                        shown.setdefault(option, set()).add(action.metavar or action.dest.upper())
        rows = "\n".join(re.findall(r"^\| (`--[^|]*)\|", sections.get(command, ""), re.M))  # a table's first cells
        wrong += [f"tessera {command} {option} {value}: --help shows {' or '.join(sorted(shown[option]))}"
                  for option, value in re.findall(r"(--[\w-]+)`?(?:, `-\w)? ([A-Z][A-Z_.=,]*)", synopsis + rows)
                  if option in shown and value not in shown[option]]
    assert not wrong, wrong


# -- docs/serving.md: settings and error codes ------------------------------------------------------------------------

def setting_models() -> list:
    from serve.service_settings import ApiKey, Limits, ServiceArgs
    from serve.settings import AppArgs, Autoscaling, Batching, LLMDeploymentArgs, ModelDeploymentArgs

    return [AppArgs, ServiceArgs, Limits, ApiKey, ModelDeploymentArgs, LLMDeploymentArgs, Batching, Autoscaling]


def test_every_setting_of_the_service_is_in_serving_md():
    text = page("serving.md")
    missing = [f"{model.__name__}.{name}" for model in setting_models() for name in model.model_fields  # as code
               if not re.search(r"`[^`\n]*\b" + name + r"\b[^`\n]*`|(?:^[ -]*|[{,] *)" + name + ":", text, re.M)]
    assert not missing, f"settings docs/serving.md does not name: {missing}"


def test_the_service_block_of_serving_md_gives_every_default():
    from serve.service_settings import Limits, ServiceArgs

    block = next(b for b in re.findall(r"```yaml\n(.*?)```", page("serving.md"), re.S) if b.startswith("service:"))
    documented = yaml.safe_load(block)["service"]
    defaults = {name: field.get_default(call_default_factory=True) for name, field in ServiceArgs.model_fields.items()}
    examples = {"api_keys", "limits"}  # api_keys shown with an entry, not its default (none); limits below
    wrong = [f"service.{name}: docs {value!r}, default {defaults.get(name, 'no such setting')!r}"
             for name, value in documented.items() if name not in examples and value != defaults.get(name, ...)]
    limits = Limits().model_dump()
    wrong += [f"limits.{name}: docs {documented['limits'].get(name)!r}, default {value!r}"
              for name, value in limits.items() if documented["limits"].get(name) != value]
    wrong += [f"limits.{name}: no such limit" for name in set(documented["limits"]) - set(limits)]
    assert not wrong, wrong


def emitted_codes() -> set[str]:
    """Every error ``code`` written as text in serve/: ``code="..."`` arguments and ``message, code = ..., "..."``."""
    codes = set()
    for path in (ROOT / "serve").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "code" and isinstance(node.value, ast.Constant):
                codes.add(node.value.value)
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
                    and isinstance(node.value, ast.Tuple):
                for target, value in zip(node.targets[0].elts, node.value.elts):
                    if getattr(target, "id", None) == "code" and isinstance(value, ast.Constant):
                        codes.add(value.value)
    return {code for code in codes if isinstance(code, str)}


def test_every_error_code_the_service_emits_is_in_serving_md():
    codes = emitted_codes()
    assert {"shutting_down", "number_out_of_range", "deployment_failed", "not_found"} <= codes  # the scan finds them
    text = page("serving.md")
    missing = sorted(code for code in codes if not re.search(r"\b" + code + r"\b", text))
    assert not missing, f"error codes docs/serving.md does not name: {missing}"


def test_every_api_error_the_service_raises_has_a_code():
    """A client acts on ``code`` (the message is prose): an ``ApiError(...)`` without one answered ``code: null``."""
    uncoded = []
    for path in (ROOT / "serve").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ApiError" \
                    and not any(k.arg in ("code", None) for k in node.keywords):
                uncoded.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not uncoded, f"ApiError without a code: {uncoded}"


# -- docs/operators.md ------------------------------------------------------------------------------------------------

def operator_section() -> str:
    text = page("operators.md")
    return text[text.index("## The operators"):]


def test_every_registered_operator_is_in_operators_md_and_every_one_it_lists_is_registered():
    from operators.registry import all_operators

    operators = all_operators()
    text = operator_section()
    missing = sorted(name for name in operators if f"`{name}`" not in text)
    known = set(operators) | {alias for cls in operators.values() for alias in (cls.aliases or ())}
    categories = "|".join(sorted({name.split(".")[0] for name in operators}))
    unknown = sorted(set(re.findall(rf"`((?:{categories})\.[a-z_0-9]+)`", text)) - known)
    assert not missing, f"registered operators docs/operators.md does not list: {missing}"
    assert not unknown, f"operators docs/operators.md lists that are not registered: {unknown}"


NUMBER = r"-?\d+(?:,\d{3})*(?:\.\d+)?"
DEFAULT_CLAIMS = [r"`([a-z_][a-z_0-9]*)` \(default `?([\w.-]+)`?[,;)]",  # `k` (default 10)
                  r"`([a-z_][a-z_0-9]*)` (" + NUMBER + r")(?![\w.])",  # `max_retries` 2
                  r"`([a-z_][a-z_0-9]*)` \((" + NUMBER + r")\)"]  # `max_messages` (3)


def default_claims() -> list[tuple[str, str, str]]:
    """(operator, param, value) for each param default docs/operators.md states, the operator being the first of
    the paragraph, bullet or table row that names one with that param."""
    from operators.registry import all_operators

    operators = all_operators()
    categories = "|".join(sorted({name.split(".")[0] for name in operators}))
    claims = []
    for block in re.split(r"\n\s*\n|\n(?=\|)|\n(?=\* )", FENCED.sub("", operator_section())):
        names = [name for name in re.findall(rf"`((?:{categories})\.[a-z_0-9]+)`", block) if name in operators]
        for pattern in DEFAULT_CLAIMS:
            for param, value in re.findall(pattern, block):
                owner = next((name for name in names if param in operators[name].Params.model_fields), None)
                if owner is not None:
                    claims.append((owner, param, value))
                elif names and pattern == DEFAULT_CLAIMS[0]:
                    claims.append((names[0], param, value))  # a default of no param there: a renamed one
    return claims


def test_every_param_default_operators_md_states_is_the_params_model():
    from operators.registry import all_operators

    operators, wrong = all_operators(), []
    claims = default_claims()
    assert len(claims) >= 15  # the patterns still find what the page states
    for name, param, value in claims:
        field = operators[name].Params.model_fields.get(param)
        if field is None:
            wrong.append(f"{name}: no param '{param}' (docs: default {value})")
            continue
        default = field.get_default(call_default_factory=True)
        try:
            same = float(value.replace(",", "")) == float(default)
        except (TypeError, ValueError):
            same = str(default) == value
        if not same:
            wrong.append(f"{name}.{param}: docs say {value}, the Params model has {default!r}")
    assert not wrong, wrong


def choices(annotation) -> set[str]:
    """The values a param's ``Literal`` (also inside ``X | None``, ``list[...]``) allows; empty when it is no choice."""
    if typing.get_origin(annotation) is typing.Literal:
        return {str(value).lower() if isinstance(value, bool) else str(value) for value in typing.get_args(annotation)}
    return set().union(*(choices(arg) for arg in typing.get_args(annotation)))


def test_every_choice_operators_md_sets_is_one_the_param_allows():
    """``similarity: cosine``, ``follow_up: links``...: the param of an operator of that paragraph or row, and one of
    its choices."""
    from operators.registry import all_operators

    operators, wrong, checked = all_operators(), [], 0
    categories = "|".join(sorted({name.split(".")[0] for name in operators}))
    for block in re.split(r"\n\s*\n|\n(?=\|)|\n(?=\* )", FENCED.sub("", operator_section())):
        names = [name for name in re.findall(rf"`((?:{categories})\.[a-z_0-9]+)`", block) if name in operators]
        for param, value in re.findall(r"`([a-z_][a-z_0-9]*): ([\w.-]+)`", block):
            owner = next((name for name in names if param in operators[name].Params.model_fields), None)
            allowed = choices(operators[owner].Params.model_fields[param].annotation) if owner else set()
            checked += bool(allowed)
            if allowed and value not in allowed:
                wrong.append(f"{owner}.{param}: docs set '{value}', it allows {sorted(allowed)}")
    assert checked >= 15 and not wrong, wrong


def test_the_shared_params_operators_md_lists_are_the_models():
    from operators.llm import LLMStep
    from operators.registry import all_operators

    operators, text = all_operators(), operator_section()
    llm = re.search(r"`operators\.llm\.LLMStep`: params (.*?);", text, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", llm)) == set(LLMStep.Params.model_fields)
    sources, shared = re.search(r"((?:`sources\.\w+`,? (?:and )?)+)share (.*?)\(", text, re.S).groups()
    retrievers, taken = re.search(r"`retrieve\.bm25` and `retrieve\.dense` take (.*?)\.\s", text, re.S).group(0, 1)
    wrong = [f"{name}: no param '{param}'"
             for names, params in ((sources, shared), (retrievers, taken))
             for name in re.findall(r"`(\w+\.\w+)`", names) if name in operators
             for param in re.findall(r"`(\w+)`", params) if param not in operators[name].Params.model_fields]
    assert not wrong, wrong


# -- links ------------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``, ``-1`` ... for
    repeats."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCED.sub("", path.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return frozenset(f"{slug}-{n}" if n else slug for slug, count in seen.items() for n in range(count + 1))


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", FENCED.sub("", path.read_text(encoding="utf-8")))
    return [target for target in re.findall(r"\]\(([^)\s]+)(?: \"[^\"]*\")?\)", text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # http:, mailto: ...: not ours to check


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no such heading in {destination.name}")
    return broken


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.name)
def test_every_relative_link_and_anchor_resolves(path):
    assert not broken_links(path)


def test_the_link_check_sees_a_missing_file_and_heading(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Deux mots: `x`\n\n[ok](#deux-mots-x) [b](b.md#b) [bad](b.md#nope) "
                                   "[gone](c.md) [web](https://example.com/#x)\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# B\n", encoding="utf-8")
    assert broken_links(tmp_path / "a.md") == ["b.md#nope: no such heading in b.md", "c.md: no such file"]
