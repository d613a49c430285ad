"""Arrays in object stores on the command line: URLs, backend options (`-o s3.endpoint_url=...`,
`-o timeout=S`), `--cache-dir`, and keeping secrets out of argv.

Backend options are written as fsspec's own FUSE front end takes them, `-o PROTOCOL.NAME=VALUE`
(`s3.`, `gcs.` or `gs.`, `az.`), and go to s3fs, gcsfs or adlfs as keyword arguments; a value that
parses as JSON is passed as such (`s3.anon=true`, `s3.client_kwargs={"region_name": "eu-west-1"}`).
An option whose name says it carries a secret (key, secret, token, password, credential, SAS,
connection string) never reaches the daemon's argv, which `ps` shows to every user: the mount
hands it over through a pipe, as it does the encryption key.
"""

from __future__ import annotations

import json
import os
import re

from ..location import SCHEMES
from .common import CliError

TIMEOUT_OPTION = "timeout"

_SECRET = re.compile(r"key|secret|token|password|credential|connection_string|sas", re.IGNORECASE)


def split_option(item: str) -> tuple[str, str, object] | None:
    """('s3', 'endpoint_url', value) for a backend option `s3.endpoint_url=VALUE`, else None (a FUSE option).
    Values are JSON where they parse as such (true, 3, {...}), else the text itself."""
    key, _, text = item.partition("=")
    family, dot, name = key.strip().partition(".")
    family = SCHEMES.get(family)
    if not dot or family not in ("s3", "gcs", "az") or not name:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    return family, name, value


def is_secret_option(name: str) -> bool:
    """Whether a backend option carries a secret (keys, tokens, passwords): never in argv, a log or a view."""
    return _SECRET.search(name) is not None


def _items(option_strings) -> list[str]:
    return [item.strip() for text in option_strings or () for item in text.split(",") if item.strip()]


def _is_remote(item: str) -> bool:
    return split_option(item) is not None or item.partition("=")[0].strip() == TIMEOUT_OPTION


def fuse_items(option_strings) -> list[str]:
    """The -o items that are FUSE options (everything but backend options and the timeout)."""
    return [item for item in _items(option_strings) if not _is_remote(item)]


def remote_items(option_strings, secret: bool | None = None) -> list[str]:
    """The backend items of -o (and the timeout); only the secret ones, or only the others, when asked."""
    out = []
    for item in _items(option_strings):
        if not _is_remote(item):
            continue
        parsed = split_option(item)
        if secret is not None and (parsed is not None and is_secret_option(parsed[1])) != secret:
            continue
        out.append(item)
    return out


def settings(items, listing_ttl_s: float = 1.0, cache_dir: str | None = None):
    """RemoteSettings from backend items; CliError (usage, exit 2) for a timeout that is not a number."""
    from ..store.storage.remote import RemoteSettings
    from ..store.storage.retry import DEFAULT_TIMEOUT_S

    options: dict = {}
    timeout = DEFAULT_TIMEOUT_S
    for item in items:
        parsed = split_option(item)
        if parsed is None:
            value = item.partition("=")[2]
            try:
                timeout = float(value)
            except ValueError:
                raise CliError(f"option '{TIMEOUT_OPTION}' needs a number of seconds, not '{value}'", code=2) from None
            if timeout <= 0:
                raise CliError(f"option '{TIMEOUT_OPTION}' must be more than 0 seconds", code=2)
            continue
        family, name, value = parsed
        target = options.setdefault(family, {})
        *path, last = name.split(".")   # s3.client_kwargs.region_name=... nests
        for part in path:
            target = target.setdefault(part, {})
        target[last] = value
    return RemoteSettings(options=options, timeout_s=timeout, listing_ttl_s=listing_ttl_s,
                          cache_dir=os.path.abspath(cache_dir) if cache_dir else None)


def browse_settings(args):
    """The RemoteSettings of `ls`, `cat`, `tree` and `check`, which take only backend options with -o."""
    options = getattr(args, "options", None) or []
    stray = fuse_items(options)
    if stray:
        raise CliError(f"option '{stray[0]}' is not a backend option (s3.NAME=..., gcs.NAME=..., az.NAME=..., "
                       f"{TIMEOUT_OPTION}=S)", code=2)
    return settings(remote_items(options), cache_dir=getattr(args, "cache_dir", None))


def write_secrets(items: list[str]) -> int | None:
    """A pipe's read end holding the secret items (JSON), for the daemon to read once; None when there are none.
    They are far below a pipe's buffer, so this never waits for the daemon."""
    if not items:
        return None
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, json.dumps(items).encode())
    finally:
        os.close(write_fd)
    return read_fd


def read_secrets(fd: int) -> list[str]:
    """The secret items the parent wrote to pipe `fd`; the pipe is closed once read."""
    try:
        with os.fdopen(fd, "rb") as f:
            items = json.loads(f.read(1 << 20) or b"[]")
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the backend options from the parent process: {exc}") from None
    return [str(item) for item in items]
