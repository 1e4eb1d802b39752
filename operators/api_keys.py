"""The service's API keys in the one form that the command line (``tessera serve``) and the service share.

Keys are long random tokens, stored as their SHA-256 (hex), so no salt is needed. Raw keys may also come from
``$TESSERA_API_KEYS`` (comma-separated); each gets the id ``env-<first 8 hex of its hash>``.
"""

from __future__ import annotations

import hashlib
from typing import Mapping

#: The environment variable that holds raw API keys, comma-separated.
KEYS_ENV = "TESSERA_API_KEYS"
#: What a key's id may be (the service's ``api_keys`` schema and ``tessera keys new`` both check it): it names a
#: folder of saved flows and shows in logs.
KEY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: The tenant of every request to a service without keys (``serve.security.auth``), so no key's id: a key ``local``
#: would be that caller, with the tasks and indices made without a key and the command line's shared saved flows.
LOCAL_TENANT = "local"


def reserved_id_problem(key_id: str) -> str | None:
    """Why ``key_id`` can be no key's id (the tenant of a service without keys), or None."""
    if key_id != LOCAL_TENANT:
        return None
    return (f"key id '{LOCAL_TENANT}' is reserved: it is the caller of a service without keys, who owns the tasks "
            "and indices made without a key and the saved flows of $TESSERA_HOME/flows that the command line "
            "shares; give the key another id")


def key_hash(raw: str) -> str:
    """The stored form of an API key: its SHA-256, hex."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def env_keys(environ: Mapping[str, str]) -> list[str]:
    """The raw keys of ``$TESSERA_API_KEYS`` in ``environ``, each once, in order."""
    return list(dict.fromkeys(raw.strip() for raw in (environ.get(KEYS_ENV) or "").split(",") if raw.strip()))


def env_key_id(digest: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The id of an environment key with hash ``digest``: ``env-`` and its first 8 hex, 16 if another has that."""
    short = f"env-{digest[:8]}"
    return short if short not in taken else f"env-{digest[:16]}"


#: The fewest characters of a key ``tessera serve`` takes from ``$TESSERA_API_KEYS``: a short key can be guessed.
MIN_KEY_CHARS = 16


def env_keys_problem(environ: Mapping[str, str]) -> str | None:
    """Why ``$TESSERA_API_KEYS`` in ``environ`` cannot be used, or None: set but holding no key (``","``, spaces),
    which would leave the service without the keys its operator meant it to have, a key under ``MIN_KEY_CHARS``, or
    one with characters other than printable ASCII (no client sends it the same way)."""
    value = environ.get(KEYS_ENV)
    if not value:  # unset, or empty as an unset variable is often written
        return None
    keys = env_keys(environ)
    if not keys:
        return (f"{KEYS_ENV} is set but holds no key ({value!r}): give comma-separated keys, or unset it to run "
                "without keys on 127.0.0.1")
    if short := [raw for raw in keys if len(raw) < MIN_KEY_CHARS]:  # the error's field names the variable
        # a key's id owns what it stored (tasks, flows, indices): a new key of its own would leave them behind
        ids = ", ".join(env_key_id(key_hash(raw)) for raw in short)
        return (f"{len(short)} key(s) shorter than {MIN_KEY_CHARS} characters, which can be guessed: "
                "use long random keys (tessera keys new, or openssl rand -hex 24). A key's id owns its tasks, flows "
                f"and indices; to keep those of {ids}, make each new key with its old id (tessera keys new --id "
                "ID) and serve with the config it prints")
    if unsendable := [raw for raw in keys if not (raw.isascii() and raw.isprintable())]:
        # a header is bytes: a client sends "é" as UTF-8 (curl) or Latin-1 (requests), and the service reads Latin-1
        ids = ", ".join(env_key_id(key_hash(raw)) for raw in unsendable)
        return (f"{len(unsendable)} key(s) ({ids}) with characters other than printable ASCII, which an "
                "Authorization header does not carry alike from every client: use keys of letters and digits "
                "(tessera keys new, or openssl rand -hex 24)")
    return None
