"""schemathesis against the running app's OpenAPI: generated requests on every route, 0 server errors and
0 schema violations expected.

Starts the real app (``serve.app:build_app``: the flow routes over the sample index, a task store in a temp
folder, no model deployments) on 127.0.0.1 with one admin API key, then runs ``schemathesis run`` on its
``/openapi.json`` with that key: the examples, coverage and fuzzing phases, positive and negative data,
``--max-examples`` cases per operation (the default 100 gives well over 2,000 requests), checks
``not_a_server_error``, ``response_schema_conformance`` and ``content_type_conformance``. Prints
schemathesis's own report (its summary lines at the end) and exits with its status. A 5xx it finds is a
bug in the app: fix it, never filter it.

    nice -n 10 .venv/bin/python benchmarks/serve_schemathesis.py [--max-examples 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from _serve import sample_index, serve_app

from operators.api_keys import key_hash

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=None, help="index folder (default: the sample index)")
    parser.add_argument("--max-examples", type=int, default=100, help="test cases per operation and phase")
    parser.add_argument("--workers", type=int, default=2, help="concurrent schemathesis workers")
    parser.add_argument("--seed", type=int, default=32, help="schemathesis's random seed")
    args = parser.parse_args()

    key = secrets.token_urlsafe(32)
    report = Path(tempfile.mkdtemp(prefix="tessera-schemathesis-"))
    # An admin key, so the admin routes (every index the service made, deleting and compacting any) are tested too.
    admin = {"api_keys": [{"id": "schemathesis", "sha256": key_hash(key), "admin": True}]}
    with serve_app(sample_index(args.index), service=admin) as base:
        command = [sys.executable, "-c", ("import sys; from schemathesis.cli import schemathesis; "
                                          "sys.exit(schemathesis())"), "run", f"{base}/openapi.json", "--header",
                   f"Authorization: Bearer {key}", "--checks", CHECKS, "--max-examples", str(args.max_examples),
                   "--workers", str(args.workers), "--seed", str(args.seed), "--request-timeout", "300",
                   "--phases", "examples,coverage,fuzzing", "--generation-database", "none", "--no-color",
                   "--report", "ndjson", "--report-dir", str(report)]
        done = subprocess.run(command, check=False, cwd=report)  # its .schemathesis/ cache stays out of the repo
    print(f"schemathesis exit status {done.returncode}; its events (to replay a failure) in {report}")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
