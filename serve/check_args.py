"""``python -m serve.check_args < config.json``: the first invalid ``args`` of Tessera's applications in a Serve
config, as one JSON line (``{"application", "field", "message"}``) and exit status 2; nothing and 0 when all are valid.

``tessera serve`` asks this before it starts Ray (the CLI does not import the service's package: the house's floors,
tests/test_architecture.py), so a bad value (``args.service.spare_task_workers: -1``) is one line naming its field
instead of an app that Ray and Serve start and then report DEPLOY_FAILED. The same holds for an entry of the
application's ``deployments`` (Serve's per-deployment overrides) that names no deployment the app builds: a typo
there failed the whole app once Ray and Serve had started ("Deployment '...' does not exist").
"""

from __future__ import annotations

import json
import sys

from operators.errors import unknown_name_hint
from serve.settings import AppArgs, ServeConfigError, parse_args

#: The import path of Tessera's application in a Serve config (serve/config.yaml).
TESSERA_APP = "serve.app:build_app"


def first_problem(config: dict) -> dict | None:
    """The first application of ``config`` whose ``args`` do not validate, with the field and the message."""
    for number, application in enumerate(config.get("applications") or []):
        if application.get("import_path") != TESSERA_APP:
            continue
        name = application.get("name") or str(number)
        try:
            args = parse_args(application.get("args") or {})
        except ServeConfigError as err:
            return {"application": name, "field": f"args.{err.field}",
                    "message": err.message.removeprefix("Value error, ")}  # pydantic's prefix of a validator's
        if problem := unknown_override(application.get("deployments") or [], args):
            return {"application": name, **problem}
    return None


def deployment_names(args: AppArgs) -> list[str]:
    """The deployments the app builds from ``args`` (a model skipped as missing is among them: its config is)."""
    return [args.api_deployment, *(m.deployment_name for m in args.models), *(m.deployment_name for m in args.llms)]


def unknown_override(overrides: list, args: AppArgs) -> dict | None:
    """The first entry of the application's ``deployments`` whose ``name`` is no deployment of the app."""
    known = deployment_names(args)
    for number, override in enumerate(overrides):
        name = override.get("name") if isinstance(override, dict) else None
        if name not in known:
            return {"field": f"deployments.{number}.name",
                    "message": f"no deployment named {name!r} in this application"
                    + unknown_name_hint(str(name), known, "deployments")}
    return None


if __name__ == "__main__":
    problem = first_problem(json.load(sys.stdin))
    if problem is not None:
        print(json.dumps(problem))
        sys.exit(2)
