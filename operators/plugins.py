"""Operator plugins: what another package's entry point or a ``TESSERA_OPERATORS`` module brings, checked
before the registry takes it (``operators.registry`` keeps the registry and the built-ins).

A plugin is never skipped: one that fails to import, names no operator, or whose operator has no valid name,
takes another's name or alias, has a ``scope`` that is none of row, query, corpus and source, cannot be called
as the contract calls it (``transform(table)``, a source's ``read(split)``; ``produce()`` written for ``produces()``),
has a ``Params`` that is no pydantic model extending its base's (a reranker's ``RerankParams``) or that has no
JSON schema (a ``Callable`` field), or a resource hint
the executors cannot use (``batch_size = 2.5``, ``num_gpus = "1"``) raises ``OperatorPluginError``, one line naming
the entry point or module. What a step key reads of a plugin's code as it was imported is
``operators.imported_code``'s.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from importlib import metadata
from types import ModuleType
from typing import Any, get_args

from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter
from pydantic.errors import PydanticInvalidForJsonSchema

from operators.base import NoParams, Operator, Scope
from operators.errors import TesseraError, close_names, did_you_mean, is_typo_of, one_line, short_repr
# Re-exported: these lived here before ``operators.imported_code`` took what a step key reads of the imported code.
from operators.imported_code import (BUILT_IN_PACKAGES, BUILT_IN_TOPS, changed_since_import,  # noqa: F401
                                     imported_source, is_local, remember_source, remember_stamps)
from operators.plugin_names import module_hint, package_hint, tessera_name_problem

#: The entry-point group that other packages register their operators under.
ENTRY_POINT_GROUP = "tessera.operators"
#: The environment variable naming plugin modules (comma-separated).
ENV_VAR = "TESSERA_OPERATORS"
_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")

Found = dict[str, tuple[type[Operator], str]]  # operator name -> (class, where it came from)


class OperatorPluginError(TesseraError):
    """An operator plugin (entry point or ``TESSERA_OPERATORS`` module) cannot be registered."""


def env_module_names() -> set[str]:
    """The modules ``TESSERA_OPERATORS`` names now."""
    return {part.strip() for part in os.environ.get(ENV_VAR, "").split(",") if part.strip()}


def add_entry_point(found: Found, ep: metadata.EntryPoint) -> None:
    dist = getattr(ep, "dist", None)
    origin = f"entry point '{ep.name} = {ep.value}' ({ENTRY_POINT_GROUP}" + (
        f", distribution {dist.name})" if dist is not None else ")")
    try:
        target = ep.load()
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, name the plugin
        raise OperatorPluginError(f"operator plugin {origin} failed to import: {_one_line(err)}") from err
    if isinstance(target, ModuleType):
        add_plugin_module(found, target, origin)
    elif is_operator(target):
        add_plugin_class(found, target, origin)
    else:
        raise OperatorPluginError(f"operator plugin {origin} names {_describe(target)}, "
                                  "not a module or an Operator subclass")


def import_plugin(module_name: str, origin: str) -> ModuleType:
    if problem := tessera_name_problem(module_name, BUILT_IN_TOPS):
        raise OperatorPluginError(f"operator plugin {origin}: {problem}")
    try:
        return importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, name the plugin
        raise OperatorPluginError(f"operator plugin {origin} failed to import: {_one_line(err)}"
                                  f"{module_hint(module_name, err)}") from err


def add_plugin_module(found: Found, module: ModuleType, origin: str) -> None:
    prefix = module.__name__ + "."
    classes = {id(v): v for v in vars(module).values() if is_operator(v) and v.name
               and (v.__module__ == module.__name__ or v.__module__.startswith(prefix))}
    if not classes:
        raise OperatorPluginError(f"operator plugin {origin}: module '{module.__name__}' defines no Operator "
                                  "subclass with a name" + (_near_misses(module) or package_hint(module)))
    for cls in classes.values():
        add_plugin_class(found, cls, origin)


def add_plugin_class(found: Found, cls: type[Operator], origin: str) -> None:
    where = f"operator plugin {origin}: {qualname(cls)}"
    if not cls.name:
        raise OperatorPluginError(f"{where} has no name: set the class attribute name = 'category.snake_name'")
    if not _NAME.fullmatch(cls.name):
        raise OperatorPluginError(f"{where}: name '{cls.name}' is not 'category.snake_name' "
                                  "(lower case, digits and _, parts joined by '.')")
    other = found.get(cls.name)
    if other is not None and other[0] is not cls:
        raise OperatorPluginError(f"operator name '{cls.name}' is used by both {qualname(other[0])} "
                                  f"({other[1]}) and {qualname(cls)} ({origin}){_rename_hint(cls, other[1])}")
    if problem := (_scope_problem(cls) or _misspelt_method(cls) or _method_problem(cls) or _init_problem(cls)
                   or _params_problem(cls) or _hints_problem(cls)):
        raise OperatorPluginError(f"{where} ({cls.name}): {problem}")
    found[cls.name] = (cls, origin)
    remember_source(cls)


def _rename_hint(cls: type[Operator], other_origin: str) -> str:
    """How to end a clash of names: a name of the plugin's own (a plugin never replaces a built-in, whose name a
    built-in flow's steps and the service's clients rely on)."""
    if "name" not in vars(cls):
        return " (it inherits the name: give it its own)"
    if other_origin != "built-in":
        return "; give one of them another name"
    package = cls.__module__.split(".")[0]
    category = package if re.fullmatch(r"[a-z][a-z0-9_]*", package) else "mylab"
    return (f"; a plugin cannot replace a built-in: give yours a name of its own, such as "
            f"'{category}.{cls.name.split('.', 1)[1]}', and use it in your flows")


def _scope_problem(cls: type[Operator]) -> str | None:
    """Why ``cls.scope`` is none of the scopes the executors batch by (``Scope``): one such as ``rows`` registered
    and ran, batched as no scope says."""
    scopes = get_args(Scope)
    if isinstance(cls.scope, str) and cls.scope in scopes:
        return None
    hint = did_you_mean(close_names(cls.scope, scopes)) if isinstance(cls.scope, str) else ""
    return f"scope {short_repr(cls.scope)} is not one of {', '.join(scopes)}{hint and '; ' + hint}"


def _near_misses(module: ModuleType) -> str:
    """The classes of ``module`` that were meant as operators: one that subclasses ``Operator`` without a name, one
    with a name that subclasses something else (a class imported from elsewhere is no near miss)."""
    mine = [v for v in vars(module).values() if inspect.isclass(v) and v.__module__ == module.__name__]
    unnamed = [v.__qualname__ for v in mine if is_operator(v) and not v.name]
    named = [v.__qualname__ for v in mine if not is_operator(v) and isinstance(getattr(v, "name", None), str)]
    said = [f"; {', '.join(unnamed)} subclasses Operator but sets no name = 'category.snake_name'"] * bool(unnamed)
    said += [f"; {', '.join(named)} has a name but does not subclass operators.base.Operator"] * bool(named)
    return "".join(said)


#: The methods the engine calls on an operator: one of the plugin's named a typo away is never called.
_CONTRACT_METHODS = ("transform", "reads", "requires", "produces", "setup", "required_models", "required_env",
                     "cache_identity", "metadata_keys", "nested_operators", "calls_model", "splits", "read")


def _misspelt_method(cls: type[Operator]) -> str | None:
    """A method of the plugin's own classes named a typo away from one the engine calls that it leaves to the base
    (``produce`` for ``produces``): the base's default ran instead, silently (its column undeclared, no setup)."""
    from operators.base import Source

    base = Source if issubclass(cls, Source) else Operator
    left = [m for m in _CONTRACT_METHODS if hasattr(base, m) and getattr(cls, m) is getattr(base, m)]
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(BUILT_IN_PACKAGES):
            continue
        for attr, value in vars(klass).items():
            meant = [m for m in left if callable(value) and not attr.startswith("_") and not hasattr(Source, attr)
                     and is_typo_of(attr, m)]
            if meant:
                return f"it defines {attr}(), which no executor calls; did you mean {meant[0]}()?"
    return None


def _method_problem(cls: type[Operator]) -> str | None:
    """Why ``cls`` cannot be called as the contract calls it: ``transform(table)`` (``read(split)`` for a source)
    left to the base, or defined to take another number of arguments. Said when the plugin loads, not mid-run after
    the steps before it."""
    from operators.base import Source

    method, base = ("read", Source) if issubclass(cls, Source) else ("transform", Operator)
    if method == "read" and cls.transform is not Source.transform:
        method = "transform"  # a source that reads in transform itself
    own = getattr(cls, method)
    if own is getattr(base, method):
        others = [m for m in ("run", "__call__", "process", "apply", "forward", "transform") if m != method
                  and any(m in vars(k) for k in cls.__mro__ if k not in (Operator, Source, object))]
        defined = f" (it defines {', '.join(f'{m}()' for m in others)})" if others else ""
        return f"it does not implement {method}(self, {'split' if method == 'read' else 'table'}){defined}"
    try:
        params = list(inspect.signature(own).parameters.values())[1:]  # after self
    except (TypeError, ValueError):  # a builtin or a C callable: nothing to read
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_more = any(p.kind is p.VAR_POSITIONAL for p in params)
    required = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if (not positional and not takes_more) or len(required) > 1:
        got = ", ".join(["self", *(p.name for p in params)])
        return f"{method}({got}) must take one argument besides self, as {method}(self, table) -> pa.Table does"
    return None


def _init_problem(cls: type[Operator]) -> str | None:
    """Why the executors cannot construct ``cls`` as they all do, ``cls(params, step_id=..., input_steps=...)``: an
    ``__init__`` of its own written with fewer arguments (``(self, params=None, *, step_id=None)``) failed in every
    flow's build, as ``unexpected keyword argument 'input_steps'``, an argument no page names."""
    if cls.__init__ is Operator.__init__:
        return None
    try:
        inspect.signature(cls).bind({}, step_id="step", input_steps=())
    except TypeError as err:
        return (f"its __init__{inspect.signature(cls)} cannot take what the executors pass, "
                f"{cls.__name__}(params, step_id=..., input_steps=...) ({err}): write def __init__(self, *args, "
                "**kwargs) calling super().__init__(*args, **kwargs), or load state in setup()")
    except ValueError:  # no signature to read (a C callable)
        return None
    return None


def _params_problem(cls: type[Operator]) -> str | None:
    """Why ``cls.Params`` cannot validate a step's params: not a pydantic model (``class Params:`` without
    ``BaseModel`` failed in the spec's build with an AttributeError naming no step), or one that drops the fields of
    its base's (a ``Reranker`` whose ``Params`` does not extend ``RerankParams`` failed reading ``text_column``)."""
    params = cls.Params
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        return f"Params is {_describe(params)}, not a pydantic model: write class Params(BaseModel)"
    if problem := _schema_problem(params):
        return problem
    for base in cls.__mro__[1:]:
        wanted = vars(base).get("Params")
        if isinstance(wanted, type) and wanted is not NoParams and not issubclass(params, wanted):
            return (f"Params does not extend {wanted.__qualname__}, the Params of its base {base.__qualname__}, "
                    f"whose fields the base reads: write class Params({wanted.__qualname__})")
    return None


def _schema_problem(params: type[BaseModel]) -> str | None:
    """Why ``params`` has no JSON schema (a ``Callable`` field, a class of its own allowed by
    ``arbitrary_types_allowed``): ``tessera ops`` and the service's operator listing are generated from it, and failed
    as an internal error naming no operator, for every operator; nor can a spec, JSON or YAML, give such a value."""
    try:
        params.model_json_schema()
        return None
    except (PydanticInvalidForJsonSchema, PydanticSchemaGenerationError):
        pass
    for name, field in params.model_fields.items():
        try:
            TypeAdapter(field.annotation).json_schema()
        except (PydanticInvalidForJsonSchema, PydanticSchemaGenerationError):
            return (f"Params field '{name}' has a type JSON cannot describe ({_type_name(field.annotation)}): a "
                    "step's params come from JSON or YAML, and tessera ops lists them from their JSON schema; take a "
                    "name or a value (text, number, list, dict) and build the object in setup()")
    return "Params has no JSON schema: tessera ops describes a step's params from it"


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(typing|collections\.abc)\.", "", str(annotation))


#: The resource hints an operator class may set, each with what the executors take (``num_cpus = 0``: a step that
#: waits on a service, which the Ray plan reads as taking no CPU).
_HINTS = {"num_gpus": ("a number, 0 or more", lambda v: _number(v) and v >= 0),
          "num_cpus": ("a number, 0 or more", lambda v: _number(v) and v >= 0),
          "batch_size": ("a whole number above 0, or None", lambda v: v is None or _whole(v) and v > 0),
          "concurrency": ("a whole number above 0, or None", lambda v: v is None or _whole(v) and v > 0)}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hints_problem(cls: type[Operator]) -> str | None:
    """Why a resource hint of ``cls`` is none the executors can use: ``batch_size = 2.5`` failed in the batching
    with a bare TypeError, ``num_gpus = "1"`` in the Ray plan."""
    for hint, (takes, fits) in _HINTS.items():
        if not fits(value := getattr(cls, hint)):
            return f"{hint} = {short_repr(value)}: it takes {takes}"
    return None


def check_aliases(found: Found) -> None:
    """An alias of a plugin operator that is another operator's name or alias would hide it."""
    owners: dict[str, tuple[type[Operator], str]] = {}
    for name, (cls, origin) in found.items():
        for alias in cls.aliases:
            other = found.get(alias) or owners.get(alias)
            if other is not None and other[0] is not cls and (origin, other[1]) != ("built-in", "built-in"):
                raise OperatorPluginError(f"operator alias '{alias}' of {qualname(cls)} ({origin}) is also "
                                          f"the name or an alias of {qualname(other[0])} ({other[1]}); drop "
                                          f"it from {cls.__qualname__}.aliases, or give it another")
            owners[alias] = (cls, origin)


def is_operator(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Operator)


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _describe(value: Any) -> str:
    return f"{qualname(value)} (a class)" if isinstance(value, type) else f"a {type(value).__name__}"


def _one_line(err: BaseException) -> str:
    """``err`` on one line; pydantic's refusal of an operator class written on ``BaseModel`` (its ``name``
    unannotated) says the base meant, not pydantic's advice to annotate ``name`` as a ``ClassVar``."""
    text = one_line(err)
    if getattr(err, "code", None) == "model-field-missing-annotation" and "`name = " in text:
        return f"{text.partition('. ')[0]}: an operator class subclasses operators.base.Operator, not BaseModel"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
