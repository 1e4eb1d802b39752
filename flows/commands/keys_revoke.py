"""``tessera keys revoke | unrevoke --id ID | --sha256 HEX`` and ``tessera keys revoked``: stop a leaked key on a
running service, without a restart.

The revocation is a row of the service's task store (``flows.key_revocations``), which every replica reads again
within ``REVOCATION_CACHE_S``. The command finds the store and the keys as ``tessera serve`` does: the Serve config
(``--config``, else ./serve/config.yaml, else the packaged one), its ``args.service.task_store`` (else
``$TESSERA_HOME/tasks.db``) and ``api_keys``, and the keys of ``$TESSERA_API_KEYS`` with their ``env-`` ids.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import getpass
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from flows.commands._support import EXIT_OK, CliError, print_json
from operators.api_keys import KEYS_ENV, env_keys, env_keys_problem, key_hash

HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Key:
    """A key of a service of the config: its hash, id, whether it is an admin's, and its service's task store."""

    sha256: str
    id: str
    admin: bool
    store: str


def register(ksub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    for name, does in (("revoke", "refuse a key on the running service within seconds, without a restart"),
                       ("unrevoke", "let a revoked key in again")):
        action = ksub.add_parser(name, parents=[common], help=does, description=f"{does[0].upper()}{does[1:]}: a "
                                 "row of the task store the service uses, found as tessera serve finds it (the "
                                 f"config's task_store, else $TESSERA_HOME/tasks.db); keys of the config and "
                                 f"${KEYS_ENV}.")
        which = action.add_mutually_exclusive_group(required=True)
        which.add_argument("--id", dest="key_id", metavar="ID", help="the key that has this id (a key of "
                           f"${KEYS_ENV}: env-..., as tessera keys id tells); a new key given the same id later is "
                           "not revoked")
        which.add_argument("--sha256", metavar="HEX", help="the key with this SHA-256 (its api_keys entry's)")
        action.add_argument("--config", type=Path, metavar="FILE", help="the Serve config the service runs "
                            "(default: as tessera serve, ./serve/config.yaml, else the packaged one)")
        action.add_argument("--json", action="store_true", help='print {"id", "sha256", "changed", "stores"}')
        action.set_defaults(handler=_cmd_revoke if name == "revoke" else _cmd_unrevoke)
    listed = ksub.add_parser("revoked", parents=[common], help="list the revoked keys",
                             description="The revoked keys of the service's task store: id, sha256, when, by whom.")
    listed.add_argument("--config", type=Path, metavar="FILE", help="the Serve config the service runs (default: "
                        "as tessera serve)")
    listed.add_argument("--json", action="store_true", help='print [{"id", "sha256", "revoked", "by", "store"}]')
    listed.set_defaults(handler=_cmd_revoked)


def config_keys(source: Path | None) -> tuple[Path, list[Key], list[str]]:
    """The config file, the keys of each of its services with their task stores, and those stores."""
    from flows.commands.serve import config_source, read_config, with_env_keys
    from flows.task_store_url import absolute_task_store_url, default_task_store_url

    source = config_source(source)
    config = read_config(source)
    if problem := env_keys_problem(os.environ):
        raise CliError(problem, field=KEYS_ENV)
    digests = [key_hash(raw) for raw in env_keys(os.environ)]
    found, stores = [], []
    for application in config.get("applications") or []:
        service = (application.get("args") or {}).get("service", {})
        if service is None:  # models only: no keys
            continue
        entries = service.get("api_keys") or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise CliError(f"{source}: args.service.api_keys must be a list of {{id, sha256}} entries (application "
                           f"'{application.get('name')}')", field="args.service.api_keys")
        url = service.get("task_store")
        store = absolute_task_store_url(url) if isinstance(url, str) and url else default_task_store_url()
        stores.append(store)
        found += [Key(str(e.get("sha256", "")).lower(), str(e.get("id")), e.get("admin") is True, store)
                  for e in with_env_keys(entries, digests)]
    return source, found, list(dict.fromkeys(stores))


def chosen(args: argparse.Namespace, source: Path, keys: list[Key]) -> list[Key]:
    """The keys ``--id`` or ``--sha256`` names (one per service that has it), or a one-line error listing the ids."""
    if args.sha256 is not None and not HEX64.fullmatch(args.sha256.lower()):
        raise CliError(f"{args.sha256!r} is no SHA-256: 64 hex digits, as an api_keys entry's sha256 (tessera keys "
                       "id tells a raw key's)", field="--sha256")
    named = [k for k in keys if (k.id == args.key_id if args.key_id is not None else k.sha256 == args.sha256.lower())]
    if not named:
        what = f"the id '{args.key_id}'" if args.key_id is not None else f"the sha256 {args.sha256}"
        ids = ", ".join(sorted({k.id for k in keys})) or "none"
        raise CliError(f"no key has {what} in {source}'s api_keys or ${KEYS_ENV} (their ids: {ids}); --config "
                       "names the config the service runs", field="--id" if args.key_id is not None else "--sha256")
    return named


def open_store(url: str):
    """An engine on the service's task store, which must exist (the command makes none), with its revoked_keys
    table (a store made before it gets it, as the service would add it)."""
    import sqlalchemy as sa

    from flows.key_revocations import make_table
    from flows.task_store_check import connect_args, driver_error, shown_url
    from operators.disk_refusal import refused_by
    from operators.home import tessera_home

    parsed = sa.engine.make_url(url)
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite and not Path(parsed.database or "").is_file():
        raise CliError(f"no task store at {parsed.database}: no service has run on it (the config's "
                       f"args.service.task_store, else $TESSERA_HOME/tasks.db; TESSERA_HOME is {tessera_home()}); "
                       "give the config the service runs (--config)", field="--config")
    try:
        engine = sa.create_engine(url, connect_args={"timeout": 30} if sqlite else connect_args(parsed))
        make_table(engine)
    except (OSError, ImportError, sa.exc.SQLAlchemyError) as err:
        if refused_by(err):  # the disk's doing, not the config's
            raise full_store(url, err) from None
        raise CliError(f"the task store {shown_url(url)} cannot be opened ({driver_error(err)})",
                       field="--config") from None
    return engine


def full_store(url: str, err: BaseException) -> CliError:
    """The error of a revocation the task store's disk refused (full, a quota, ``ulimit -f``): it names the store and
    says nothing changed, where it was an internal error (``OperationalError: ... disk I/O error``), or blamed
    ``--config`` when the store could not even be opened."""
    from flows.task_store_check import driver_error, shown_url

    return CliError(f"the task store {shown_url(url)} could not be written ({driver_error(err)}): its disk is full, or "
                    "at a quota or file size limit; nothing was changed: free space there, then run the command again")


@contextlib.contextmanager
def writing(url: str) -> Iterator[None]:
    """A write to the task store at ``url`` whose disk refuses it raises ``full_store``'s error."""
    import sqlalchemy as sa

    from operators.disk_refusal import refused_by

    try:
        yield
    except (OSError, sa.exc.SQLAlchemyError) as err:
        if not refused_by(err):
            raise
        raise full_store(url, err) from None


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container's uid without a name
        user = f"uid {os.getuid()}"
    return f"tessera keys revoke ({user}@{socket.gethostname()})"


def when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cmd_revoke(args: argparse.Namespace) -> int:
    from flows.key_revocations import REVOCATION_CACHE_S, revocation, revoke, revoked_hashes
    from flows.task_store_check import shown_url

    source, keys, _ = config_keys(args.config)
    named = chosen(args, source, keys)
    changed, lines = False, []
    for key in named:
        engine = open_store(key.store)
        with writing(key.store):
            row = revoke(engine, key.sha256, key.id, who())
        with engine.connect() as conn:
            revoked, before = revoked_hashes(conn), None if row else revocation(conn, key.sha256)
        engine.dispose()
        changed |= row is not None
        lines.append(f"revoked key '{key.id}' (sha256 {key.sha256[:12]}...) in the task store {shown_url(key.store)}: "
                     f"every replica refuses it within {REVOCATION_CACHE_S:g} s" if row else
                     f"key '{key.id}' was revoked already, {when(before['revoked'])} by {before['by']}")
        admins = [k for k in keys if k.admin and k.store == key.store and k.sha256 not in revoked]
        if key.admin and not admins:  # a leaked admin key must go all the same: said, not refused
            print(f"tessera keys revoke: note: no admin key of {source} is left unrevoked: the /v1/admin routes refuse "
                  "every key until one is served (tessera keys new --id ID --admin)", file=sys.stderr)
    return _report(args, named, changed, lines, f"to let it in again: tessera keys unrevoke --id {named[0].id}")


def _cmd_unrevoke(args: argparse.Namespace) -> int:
    from flows.key_revocations import REVOCATION_CACHE_S, unrevoke
    from flows.task_store_check import shown_url

    source, keys, stores = config_keys(args.config)
    try:
        named = chosen(args, source, keys)
    except CliError:  # a key taken out of the config since: its revocation, found by the id or hash it keeps
        named = revoked_keys_named(args, stores) or chosen(args, source, keys)
    changed, lines = False, []
    for key in named:
        engine = open_store(key.store)
        with writing(key.store):
            done = unrevoke(engine, key.sha256)
        engine.dispose()
        changed |= done
        lines.append(f"key '{key.id}' is let in again by every replica within {REVOCATION_CACHE_S:g} s (task store "
                     f"{shown_url(key.store)})" if done else f"key '{key.id}' was not revoked")
    return _report(args, named, changed, lines, None)


def revoked_keys_named(args: argparse.Namespace, stores: list[str]) -> list[Key]:
    """The revoked keys of ``stores`` that ``--id`` or ``--sha256`` names."""
    from flows.key_revocations import revoked_rows

    column, value = ("key_id", args.key_id) if args.key_id is not None else ("sha256", args.sha256.lower())
    found = []
    for store in stores:
        engine = open_store(store)
        with engine.connect() as conn:
            found += [Key(r["sha256"], r["key_id"], False, store) for r in revoked_rows(conn) if r[column] == value]
        engine.dispose()
    return found


def _report(args: argparse.Namespace, named: list[Key], changed: bool, lines: list[str], then: str | None) -> int:
    from flows.task_store_check import shown_url

    if args.json:
        print_json({"id": named[0].id, "sha256": named[0].sha256, "changed": changed,
                    "stores": sorted({shown_url(k.store) for k in named})})
    else:
        print("\n".join([*lines, *([then] if then and changed else [])]), flush=True)
    return EXIT_OK


def _cmd_revoked(args: argparse.Namespace) -> int:
    from flows.key_revocations import revoked_rows
    from flows.task_store_check import shown_url

    _, _, stores = config_keys(args.config)
    rows = []
    for store in stores:
        engine = open_store(store)
        with engine.connect() as conn:
            rows += [{"id": r["key_id"], "sha256": r["sha256"], "revoked": r["revoked"], "by": r["by"],
                      "store": shown_url(store)} for r in revoked_rows(conn)]
        engine.dispose()
    if args.json:
        print_json(rows)
    elif not rows:
        print("no key is revoked")
    else:
        print("\n".join(f"{r['id']:<20} {r['sha256'][:12]}...  {when(r['revoked'])}  by {r['by']}" for r in rows))
    return EXIT_OK
