"""``python -m serve.check_args < config.json``: the first invalid ``args`` of Tessera's applications in a Serve
config, as one JSON line (``{"application", "field", "message"}``) and exit status 2; nothing and 0 when all are valid.

``tessera serve`` asks this before it starts Ray (the CLI does not import the service's package: the house's floors,
tests/test_architecture.py), so a bad value (``args.service.spare_task_workers: -1``) is one line naming its field
instead of an app that Ray and Serve start and then report DEPLOY_FAILED.
"""

from __future__ import annotations

import json
import sys

from serve.settings import ServeConfigError, parse_args

#: The import path of Tessera's application in a Serve config (serve/config.yaml).
TESSERA_APP = "serve.app:build_app"


def first_problem(config: dict) -> dict | None:
    """The first application of ``config`` whose ``args`` do not validate, with the field and the message."""
    for number, application in enumerate(config.get("applications") or []):
        if application.get("import_path") != TESSERA_APP:
            continue
        try:
            parse_args(application.get("args") or {})
        except ServeConfigError as err:
            return {"application": application.get("name") or str(number), "field": f"args.{err.field}",
                    "message": err.message.removeprefix("Value error, ")}  # pydantic's prefix of a validator's
    return None


if __name__ == "__main__":
    problem = first_problem(json.load(sys.stdin))
    if problem is not None:
        print(json.dumps(problem))
        sys.exit(2)
