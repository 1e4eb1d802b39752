"""One error hierarchy for Tessera; every error names the step it came from.

The API layer maps ``SpecError``/``ParamsError`` to HTTP 422 with ``field``, and
``OperatorError`` to a failed task that names the step and operator.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

# one_line, short_repr, did_you_mean and the rest re-exported: they lived here before ``error_text``
from operators.error_text import (close_names, did_you_mean, in_chain, is_typo_of, one_line,  # noqa: F401
                                  see_docs, short_repr, shown_json, shown_name, unknown_name_hint, values_as_json)


class TesseraError(Exception):
    """Base of every error Tessera raises on purpose."""

    #: The flow the error came from, where the caller runs several (``tessera bench``) and sets it.
    flow: str | None = None

    def __init__(self, message: str, *, step: str | None = None, op: str | None = None, field: str | None = None):
        self.message = message
        self.step = step
        self.op = op
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = [f"flow '{self.flow}'"] if self.flow else []
        if self.step:
            where.append(f"step '{self.step}'")
        if self.op:
            where.append(f"operator '{self.op}'")
        if self.field:
            where.append(f"field '{self.field}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def to_dict(self) -> dict[str, Any]:
        return {"error": type(self).__name__, "message": self.message, "step": self.step,
                "op": self.op, "field": self.field}

    @property
    def _render_traceback_(self) -> Callable[[], list[str]]:
        """IPython's hook for a cell's error: the caller's frames and this error, not Tessera's own (absent, so
        IPython's whole traceback, outside IPython, with ``TESSERA_DEBUG`` on or a cause to show:
        ``operators.notebook_traceback``)."""
        from operators.notebook_traceback import short_traceback, wanted

        if not wanted(self):
            raise AttributeError("_render_traceback_")
        return lambda: short_traceback(self)


class SpecError(TesseraError):
    """A flow spec is invalid (unknown operator, cycle, missing input...)."""


def first_validation_problem(err: Any) -> tuple[dict, str | None, str]:
    """Pydantic's first error of ``err``: the error, its field (the dotted ``loc``; None at the top) and its message
    in a spec author's words: "unknown field" for an extra one, and without "Value error, ", pydantic's prefix to
    a validator's own ``ValueError``, whose text is already written for the user."""
    first = err.errors()[0]
    return first, ".".join(str(part) for part in first["loc"]) or None, plain_message(first)


def plain_message(error: dict) -> str:
    """One pydantic error's message for a spec's author (see ``first_validation_problem``)."""
    return "unknown field" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")


#: A union's branches that are JSON types, as pydantic names them in an error's ``loc``, in a client's words.
_JSON_KINDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean", "none": "null",
               "date": "a date"}
#: The same branches in a spec's (or a Python caller's) words, as ``_PARAM_KINDS`` says a param of one kind: "a
#: list of strings", "a whole number", where an HTTP client reads JSON's "an array of strings", "an integer" (a
#: boolean stays one: "true or false" among other kinds reads as two of them).
_SPEC_KINDS = {**_JSON_KINDS, "int": "a whole number"}
#: What a list and a mapping are called, in a client's words and in a spec's (YAML's, Python's).
_LIST_WORDS = {"JSON": "an array", "spec": "a list"}
_MAPPING_WORDS = {"JSON": "an object", "spec": "a mapping"}


def client_problems(errors: list[dict], said: Any = None) -> list[tuple[str, str]]:
    """Pydantic's ``errors`` as (field, message) in a client's terms: a union's branches (``input.str``,
    ``input.list[str]``) and a dict's ``[key]`` are no field the client sent. A value no branch takes is one problem
    ("must be a string or an array of strings, not a number"); one a branch took (a list) is wrong inside it alone.
    ``said``: an error's message (default pydantic's, without "Value error, ")."""
    said = said or (lambda error: error["msg"].removeprefix("Value error, "))
    points = [_branch_points(error, errors) for error in errors]
    entered = {tuple(e["loc"][:i]) for at, e in zip(points, errors) for i in at if i < len(e["loc"]) - 1}
    fields: dict[str, list[tuple[list[int], dict]]] = {}
    for at, error in zip(points, errors):
        loc = error["loc"]
        if at and at[-1] == len(loc) - 1 and tuple(loc[:at[-1]]) in entered:
            continue  # the value was of another branch's kind, and is wrong inside that branch
        field = ".".join(str(p) for p in _without_branches(loc, at))
        fields.setdefault(field, []).append((at, error))
    return [(field, _one_message(found, said)) for field, found in fields.items()]


def _branch_points(error: dict, errors: list[dict]) -> list[int]:
    """The places of ``error``'s ``loc`` that name a union's branch: a type's name where another error at the same
    place names another type (two model names alone are not enough: they may be keys, ``Year`` and ``Month``)."""
    loc = error["loc"]
    return [i for i, part in enumerate(loc) if _type_name(part) and any(
        len(other["loc"]) > i and other["loc"][:i] == loc[:i] and other["loc"][i] != part
        and _type_name(other["loc"][i]) and (_json_type(part) or _json_type(other["loc"][i])) for other in errors)]


def _type_name(part: Any) -> bool:
    return isinstance(part, str) and (_json_type(part) or part[:1].isupper())


def _json_type(part: Any) -> bool:
    return isinstance(part, str) and (part in _JSON_KINDS or "[" in part)


def _one_message(found: list[tuple[list[int], dict]], said: Any) -> str:
    """One field's message: "must be A or B, not C" for a value each branch of a union refused."""
    if len(found) > 1 and all(at and at[-1] == len(e["loc"]) - 1 for at, e in found):
        from operators.json_tree import json_kind

        return f"must be {_kinds_listed(found, 'JSON')}, not {json_kind(found[0][1].get('input'))}"
    return "; ".join(dict.fromkeys(said(e) for _, e in found))


def _kinds_listed(found: list[tuple[list[int], dict]], words: str) -> str:
    """The kinds of a union's branches that each refused a value, in ``words`` (``_LIST_WORDS``' keys): a client's
    "a string or an array of strings", a spec's "a string or a list of strings"."""
    kinds = list(dict.fromkeys(_branch_kind(str(e["loc"][-1]), words) for _, e in found))
    for whole in ("an integer", "a whole number"):
        if "a number" in kinds and whole in kinds:
            kinds.remove(whole)
    return ", ".join(kinds[:-1]) + f" or {kinds[-1]}" if len(kinds) > 1 else kinds[0]


def _branch_kind(part: str, words: str) -> str:
    """A union's branch as pydantic names it (``list[str]``, ``RerankDocument``) in ``words``."""
    if part.startswith("function-") and ", " in part:  # a validator's wrapper: function-after[check(), str]
        return _branch_kind(part[part.rindex(", ") + 2:-1], words)
    if part.startswith("list["):
        inner = {"a string": "strings", "an object": "objects", "a mapping": "mappings"}.get(
            _branch_kind(part[5:-1], words))
        return f"{_LIST_WORDS[words]} of {inner}" if inner else _LIST_WORDS[words]
    if part.startswith("dict[") or part[:1].isupper():
        return _MAPPING_WORDS[words]
    return (_JSON_KINDS if words == "JSON" else _SPEC_KINDS).get(part, part)


class ParamsError(SpecError):
    """An operator's params do not validate."""

    @classmethod
    def from_validation(cls, err: Any, *, op: str | None, step: str | None,
                        known: Iterable[str] | None = None) -> "ParamsError":
        """The first error of a pydantic ``ValidationError`` (and the other params in error); ``known``, the operator's
        parameter names, turns an unknown one into "did you mean 'k'?" and the list of parameters. An unknown
        parameter comes first: a misspelt required one (``ulr``) is also a missing one (``url``), and the name
        sent is what the user must fix."""
        errors = err.errors()
        first = next((e for e in errors if e["type"] == "extra_forbidden"), _branch_taken(errors))
        loc = user_field(first, errors) or None  # filter.region.1, not pydantic's filter.region.list[str].1
        kind = first["type"]
        if kind == "extra_forbidden":
            message = "unknown parameter"
            if known is not None and len(first["loc"]) == 1:
                message += unknown_name_hint(str(first["loc"][0]), known, "parameters")
        elif kind == "missing" and len(first["loc"]) == 1 and op:  # a param its operator gives no default
            message = "Field required: the operator gives this parameter no default, so the step's params must set it"
        else:
            message = value_problem(first, errors, quoted=quotable(first, known)) + expected(first, known)
        others = list(dict.fromkeys(user_field(e, errors) for e in errors if e["loc"][:1] != first["loc"][:1]))
        if others:  # the other params in error, each once (a union's branches give one error each)
            message += f" (+{len(others)} more error{'s' if len(others) > 1 else ''}: {', '.join(others)})"
        return cls(message, op=op, step=step, field=f"params.{loc}" if loc else "params")


#: Pydantic's error types of a number or a flag, in the words of a spec's author (YAML, JSON or the web page's
#: editor): "Input should be a valid integer, unable to parse string as an integer" named Python's parsing.
_PARAM_KINDS = {"int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
                "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
                "bool_parsing": "true or false", "list_type": "a list", "dict_type": "a mapping (names and values)",
                "string_type": "a string", "model_type": "a mapping (names and values)"}

#: Pydantic's errors whose input is no value its author wrote (a param left out, the params whole, an unknown key):
#: ``value_problem`` quotes none.
_UNQUOTED = {"missing", "extra_forbidden", "value_error", "assertion_error"}


def param_problem(error: dict) -> str:
    """One pydantic error of a param as what the value must be: "must be a whole number" for a kind (``_PARAM_KINDS``),
    pydantic's "Input should be greater than 0" (or "String should have at least 1 character") as "must be greater
    than 0", its other messages as written."""
    if error["type"] in _PARAM_KINDS:
        return f"must be {_PARAM_KINDS[error['type']]}"
    message = plain_message(error)
    said = re.match(r"(Input|String|List|Dictionary|Tuple|Set|Value) should (be )?", message)
    return f"must {said.group(2) or ''}{message[said.end():]}" if said else message


def value_problem(error: dict, errors: list[dict] | None = None, *, quoted: bool = True) -> str:
    """One pydantic error of a field as a spec's author is told it: what the value must be (``param_problem``; a
    value every branch of a union refused, each branch: "must be a string or a list of strings") and, where
    ``quoted``, the value given (``shown_value``). ``errors``: all of pydantic's, which say where a union is."""
    errors = errors or [error]
    loc, points = error["loc"], _branch_points(error, errors)
    if points and points[-1] == len(loc) - 1:  # the value itself is of no branch's kind
        said = "must be " + _kinds_listed([(at, e) for e in errors if e["loc"][:-1] == loc[:-1]
                                           and (at := _branch_points(e, errors)) and at[-1] == len(e["loc"]) - 1],
                                          "spec")
    else:
        said = param_problem(error)
    quoted = quoted and error["type"] not in _UNQUOTED
    return said + (f" (got {shown_value(error.get('input'))})" if quoted else "")


def user_field(error: dict, errors: list[dict] | None = None) -> str:
    """An error's field as its author wrote it (``filter.region.1``): without pydantic's names of a union's branches
    (``region.list[str].1``, ``stopwords.str``) or a dict's ``[key]``, as ``client_problems`` names it."""
    return ".".join(str(part) for part in user_loc(error, errors))


def user_loc(error: dict, errors: list[dict] | None = None) -> list[Any]:
    """The parts of ``user_field``."""
    return _without_branches(error["loc"], _branch_points(error, errors or [error]))


def _without_branches(loc: Any, points: list[int]) -> list[Any]:
    """``loc`` without the places that name a union's branch (``points``, ``_branch_points``) or a dict's ``[key]``."""
    return [part for i, part in enumerate(loc) if i not in points and part != "[key]"]


def shown_value(value: Any) -> str:
    """A refused value as its author wrote it: ``null``, ``true`` and ``false`` (YAML's and JSON's), not Python's
    ``None`` and ``True``; any other value bounded by ``short_repr`` ('abc', 1.5, [1]), or as JSON (``shown_json``)
    for a request that is JSON."""
    if (as_json := shown_json(value)) is not None:
        return as_json
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return short_repr(value)


def _branch_taken(errors: list[dict]) -> dict:
    """Of a union's errors, the one of the branch the value was written for: a list refused by ``str`` and by
    ``list[str]`` (``region: [Europe, 3]``) is wrong in its item, not in being a list."""
    first = errors[0]
    if first["type"] == "string_type" and isinstance(first.get("input"), list) and first["loc"][-1:] == ("str",):
        union = first["loc"][:-1]
        return next((e for e in errors[1:] if e["loc"][:len(union)] == union and len(e["loc"]) > len(union)
                     and str(e["loc"][len(union)]).startswith("list[")), first)
    return first


def quotable(error: dict, known: Iterable[str] | None) -> bool:
    """Whether an error may quote the value it refused: not a key (a param marked ``secret()`` or ``sent_headers()``
    in ``operators/local_files.py``, ``known`` mapping the params to pydantic's fields), nor the params whole (a check
    of the model, whose input holds those), since the error reaches logs and clients (``GET /flows``' reasons). A
    param left out (``missing``) has no value: pydantic's input is then the params whole, a key among them."""
    if error["type"] == "missing":
        return False
    if not isinstance(known, dict):
        return True
    extras = {name: getattr(field, "json_schema_extra", None) for name, field in known.items()}
    keys = {name for name, extra in extras.items()
            if isinstance(extra, dict) and (extra.get("secret") or extra.get("sent_headers"))}
    return not keys or (bool(error["loc"]) and error["loc"][0] not in keys)


def expected(error: dict, known: Iterable[str] | None) -> str:
    """For a mapping or a list given where a param takes a name (``model: {name: ...}``), what that param takes: its
    description (``known`` maps the params to pydantic's fields), which says which model, index or column it names.
    A mapping of keys without values is YAML's reading of text in braces left unquoted (``prompt: {query}``): say
    so, since that param takes text, not a name."""
    value, loc = error.get("input"), error["loc"]
    if error["type"] == "string_type" and isinstance(value, dict) and value and all(v is None for v in value.values()):
        written = "{" + ", ".join(map(str, value)) + "}"  # YAML's {query}: a mapping of keys without values
        return (f"; YAML reads an unquoted {written} as a mapping: put the text in quotes "
                f"({loc[-1] if loc else 'prompt'}: \"{written} ...\")")
    if error["type"] != "string_type" or not isinstance(value, (dict, list)) or not isinstance(known, dict):
        return ""
    if any(not _union_branch(str(part)) for part in loc[1:]):  # a value inside the param (filter.region), not it
        return ""
    description = getattr(known.get(loc[0]) if loc else None, "description", None)
    given = "a mapping" if isinstance(value, dict) else "a list"
    return f"; {loc[0]} takes a name, not {given}: {description}" if description else ""


def _union_branch(part: str) -> bool:
    """Whether a part of pydantic's ``loc`` names a union's branch (``str``, ``list[str]``, ``ModelRef``), no field."""
    return part == "str" or "[" in part or part[:1].isupper()


class UnknownOperatorError(SpecError):
    """A spec names an operator that is not registered."""


class NonFiniteNumberError(ParamsError):
    """A param holds NaN or an infinity (YAML's ``.nan``, Python's JSON's ``NaN``): no param means either."""


class OperatorError(TesseraError):
    """An operator failed while running."""


class StepFailed(OperatorError):
    """A step failed a query by its failure policy (``on_error: error``): a model's or a service's failure as the
    step met it (``__cause__``), where the default policy would have marked the query degraded and gone on."""


class MissingColumnsError(OperatorError):
    """An operator's input lacks columns it needs."""


class SettingError(TesseraError):
    """An environment variable that Tessera reads holds a value it cannot use."""


class CacheError(TesseraError):
    """The step cache cannot be used (not a cache, not a folder, a damaged database) or was asked what it cannot do
    (``prune`` with no bound or one it cannot use). ``flows.cache`` uses it, and users import it from there."""


class KeywordError(TesseraError, TypeError):
    """A function of the Python API was given a keyword argument it does not take (``keephistory=``): a
    ``TypeError``, as Python's own is, that also says which argument was meant (``flows.keywords``)."""


class MissingAttributeError(TesseraError, AttributeError):
    """An attribute an API object (``Flow``, ``Index``, ``FlowResult``) lacks, saying where it is or what was meant;
    ``hasattr`` reads it as the ``AttributeError`` it is, with Python's ``name`` and ``obj``."""

    def __init__(self, message: str, *, name: str, obj: Any) -> None:
        TesseraError.__init__(self, message)
        self.name, self.obj = name, obj


class FlowCancelled(TesseraError):
    """A run was cancelled through its cancellation token."""


class SourceError(OperatorError):
    """A source cannot read its input: a missing path, an unreadable record, a failed query."""


class SourceNotFoundError(SourceError):
    """A source's path, glob or folder matches nothing."""
