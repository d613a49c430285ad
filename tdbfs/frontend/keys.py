"""Where the key of an encrypted array comes from: a key file, or the environment. Read by the front
ends only; the format decodes the bytes they read (format/reversers/keys.py)."""

from __future__ import annotations

import os

from ..format.reversers.keys import BadKeyError, EncryptionKey, parse_key

#: environment variables the front ends read the key from (the file path is preferred)
ENV_KEY_FILE = "TDBFS_KEY_FILE"
ENV_KEY = "TDBFS_ENCRYPTION_KEY"

__all__ = ["ENV_KEY", "ENV_KEY_FILE", "BadKeyError", "key_from_environment", "read_key_file"]


def read_key_file(path: str) -> EncryptionKey:
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise BadKeyError(f"cannot read the key file {path}: {exc.strerror}") from None
    return parse_key(raw, f"key file {path}")


def key_from_environment(environ=None) -> EncryptionKey | None:
    """The key named by TDBFS_KEY_FILE (a path) or given by TDBFS_ENCRYPTION_KEY, or None."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_KEY_FILE)
    if path:
        return read_key_file(path)
    value = env.get(ENV_KEY)
    if value:
        return parse_key(value.encode("utf-8"), f"${ENV_KEY}")
    return None
