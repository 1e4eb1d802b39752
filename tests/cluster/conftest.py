"""The validators the cluster configs are checked with, offline: the schemas that Ray and KubeRay publish, Serve's
own config schema, and Tessera's argument parser. No Ray is started and nothing reaches a network."""

from __future__ import annotations

import contextlib
import copy
import io
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBERAY_CRDS = REPO.parent / "shared" / "kuberay"  # KubeRay's CRDs (ray-operator/config/crd/bases)


def strict(schema: Any) -> Any:
    """A CRD's OpenAPI schema with unknown fields refused, as ``kubectl apply --validate=strict`` does: a
    Kubernetes API server drops a misspelt field without a word, and the manifest silently loses it."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.fixture(scope="session")
def crd_validator() -> Callable[[str], Any]:
    """``crd_validator("rayservices")``: a jsonschema validator for the storage version of that KubeRay CRD."""
    import jsonschema

    validators: dict[str, Any] = {}

    def get(plural: str) -> Any:
        path = KUBERAY_CRDS / f"ray.io_{plural}.yaml"
        if not path.is_file():
            pytest.skip(f"KubeRay's CRD {path} is not on this machine (copy ray-operator/config/crd/bases from "
                        "the KubeRay project to ../shared/kuberay)")
        if plural not in validators:
            crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
            schema = strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            validators[plural] = jsonschema.Draft7Validator(schema)
        return validators[plural]

    return get


@pytest.fixture(scope="session")
def schema_errors() -> Callable[[Any, Any], list[str]]:
    """``schema_errors(validator, document)``: every violation, as ``path: message`` lines."""
    return _errors_of


def _errors_of(validator: Any, document: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))]


@pytest.fixture(scope="session")
def parse_entrypoint() -> Callable[[str], tuple[str, Any]]:
    """``parse_entrypoint("python -m flows.ingest ...")``, see ``_parse_entrypoint``."""
    return _parse_entrypoint


def _parse_entrypoint(command: str) -> tuple[str, Any]:
    """``python -m flows.X ARGS`` parsed by Tessera's own parser (``python -m flows.X`` takes the options of
    ``tessera X``); returns the module and the parsed arguments. A bad flag raises ``ValueError`` with argparse's
    message."""
    import importlib.util

    from flows.commands import build_parser

    words = shlex.split(command)
    if words[:2] != ["python", "-m"] or len(words) < 3:
        raise ValueError(f"not a `python -m MODULE` entry point: {command!r}")
    module = words[2]
    try:
        found = importlib.util.find_spec(f"{module}.__main__") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise ValueError(f"entry point module {module} has no __main__")
    subcommand = module.rpartition(".")[2]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            args = build_parser().parse_args([subcommand, *words[3:]])
        except SystemExit:
            raise ValueError(stderr.getvalue().strip().splitlines()[-1]) from None
    return module, args
