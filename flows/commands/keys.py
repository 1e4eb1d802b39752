"""``tessera keys new --id ID [--admin] | id [KEY]``: make the service's API keys and tell a key's id (``revoke``,
``unrevoke`` and ``revoked``: ``flows.commands.keys_revoke``).

The service keeps a key only as its SHA-256 (``operators.api_keys``): ``new`` shows a fresh key once, with the
``api_keys`` entry that lets it in; ``id`` tells the id and hash a raw key gets in ``$TESSERA_API_KEYS``. A key's
id owns its tasks, chats, saved flows and indices (docs/serving.md, "API keys and tenants").
"""

from __future__ import annotations

import argparse
import getpass
import re
import secrets
import sys

from flows.commands import keys_revoke
from flows.commands._support import EXIT_OK, CliError, print_json, show_help
from operators.api_keys import (KEY_ID_PATTERN, KEYS_ENV, MIN_KEY_CHARS, env_key_id, env_keys, env_keys_problem,
                                key_hash, reserved_id_problem)

#: Random bytes in a new key: 256 bits, 43 URL-safe characters.
KEY_BYTES = 32
#: Says what a key found in a file or a log is for, and keeps a key from starting with '-' (read as an option).
KEY_PREFIX = "tessera_"
#: Where a serve config lists the keys (serve/config.yaml).
CONFIG_PLACE = "applications[].args.service.api_keys"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    keys = sub.add_parser("keys", help="make an API key of the service, tell a key's id, revoke a key",
                          description="API keys of the service (tessera serve): the service stores only their "
                          "SHA-256, and a key's id owns what the key creates.")
    ksub = keys.add_subparsers(title="actions", metavar="ACTION")
    new = ksub.add_parser("new", parents=[common], help="make a random key and print the entry for the config",
                          description="Make a random key, print it once, and the entry to add under "
                          f"{CONFIG_PLACE} in a serve config. The id is checked as the service checks it.")
    new.add_argument("--id", required=True, dest="key_id", metavar="ID",
                     help="the key's id, which owns its tasks, chats, saved flows and indices (to replace a key, "
                     "give the new one the old id); letters, digits, _ . -")
    new.add_argument("--admin", action="store_true", help="an admin key: also lists, compacts and deletes every "
                     "key's indices")
    new.add_argument("--json", action="store_true", help='print {"id", "key", "sha256", "admin"}')
    new.set_defaults(handler=_cmd_new)
    ident = ksub.add_parser("id", parents=[common], help=f"the id and sha256 a raw key gets in ${KEYS_ENV}",
                            description=f"The id (env- and 8 hex digits of its SHA-256) and the SHA-256 a raw key "
                            f"gets in ${KEYS_ENV}; 16 hex digits if another key of the service already has that "
                            "id. Without KEY, reads the key from standard input (asked for, unechoed, at a "
                            "terminal), which keeps it out of the shell's history.")
    ident.add_argument("key", nargs="?", metavar="KEY", help="the raw key (default: read from standard input)")
    ident.add_argument("--json", action="store_true", help='print {"id", "sha256"}')
    ident.set_defaults(handler=_cmd_id)
    keys_revoke.register(ksub, common)
    keys.set_defaults(handler=lambda args: show_help(keys))


def new_key() -> str:
    """A fresh random key (``secrets``): URL-safe, so it goes in a header, a URL or an environment variable as is."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def config_line(entry: dict) -> str:
    """``entry`` as one YAML flow mapping, quoted where YAML would read a value as another type (an id ``2024``)."""
    import yaml

    return yaml.safe_dump(entry, default_flow_style=True, sort_keys=False, width=1 << 16).strip()


def check_id(key_id: str) -> None:
    """Refuse an id the service's ``api_keys`` schema would refuse (the same pattern, ``operators.api_keys``)."""
    if not re.fullmatch(KEY_ID_PATTERN, key_id):
        raise CliError(f"{key_id!r} is no key id the service takes: 1 to 64 letters, digits, '_', '.' or '-', "
                       "starting with a letter or digit", field="--id")
    if problem := reserved_id_problem(key_id):
        raise CliError(problem, field="--id")


def _cmd_new(args: argparse.Namespace) -> int:
    key = new_key()
    entry = {"id": args.key_id, "sha256": key_hash(key), **({"admin": True} if args.admin else {})}
    check_id(args.key_id)
    line = config_line(entry)
    if args.json:
        print_json({"id": args.key_id, "key": key, "sha256": entry["sha256"], "admin": args.admin})
        return EXIT_OK
    print(f"key     {key}\n"
          "        shown only this time: store it now (the service keeps only its sha256)\n"
          f"id      {args.key_id}{'  (admin)' if args.admin else ''}\n"
          f"sha256  {entry['sha256']}\n\n"
          f"add under {CONFIG_PLACE} in the serve config:\n"
          f"  - {line}\n"
          f"{own_config_hint()}\n"
          "clients send: Authorization: Bearer KEY", flush=True)
    return EXIT_OK


def own_config_hint() -> str:
    """Where a user whose folder has no ./serve/config.yaml (Tessera installed from a wheel) gets a config to add the
    entry to: the packaged one sits inside site-packages, which a reinstall replaces."""
    from flows.commands.serve import LOCAL_CONFIG

    if LOCAL_CONFIG.is_file():
        return ""
    return ("  (no ./serve/config.yaml here: tessera serve --print-config > serve.yaml writes the one tessera serve "
            "runs; add the line there, then tessera serve --config serve.yaml)\n")


def _read_key(given: str | None) -> str:
    """The key as ``$TESSERA_API_KEYS`` would hold it (spaces around it dropped), from the argument or stdin."""
    if given is not None:
        raw = given
    elif sys.stdin is not None and sys.stdin.isatty():
        raw = getpass.getpass("API key: ")
    else:
        raw = sys.stdin.read() if sys.stdin is not None else ""
    raw = raw.strip()
    if not raw:
        raise CliError("no key given: pass KEY or send it on standard input", field="KEY")
    if "\n" in raw:
        raise CliError("give one key, on one line", field="KEY")
    found = env_keys({KEYS_ENV: raw})
    if found != [raw]:
        raise CliError(f"{KEYS_ENV} is comma-separated: this would be {len(found)} keys; a key holds no ','",
                       field="KEY")
    if env_keys_problem({KEYS_ENV: raw}):  # the service's rule; its message counts keys, this is one
        if len(raw) >= MIN_KEY_CHARS:  # long enough: a character no client sends alike
            raise CliError(f"the service refuses a key with characters other than printable ASCII in {KEYS_ENV}: "
                           "an Authorization header does not carry them alike from every client (make one with "
                           "tessera keys new)", field="KEY")
        raise CliError(f"{len(raw)} characters: the service refuses a key under {MIN_KEY_CHARS} in {KEYS_ENV}, "
                       "which can be guessed (make one with tessera keys new)", field="KEY")
    return raw


def _cmd_id(args: argparse.Namespace) -> int:
    digest = key_hash(_read_key(args.key))
    key_id = env_key_id(digest)
    if args.json:
        print_json({"id": key_id, "sha256": digest})
        return EXIT_OK
    print(f"id      {key_id}  (in ${KEYS_ENV})\n"
          f"sha256  {digest}\n\n"
          f"the same key, with the same id, under {CONFIG_PLACE}:\n"
          f"  - {config_line({'id': key_id, 'sha256': digest})}", flush=True)
    return EXIT_OK
