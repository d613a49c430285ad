"""What every command shares: its one-line errors, and opening the array and its view."""

from __future__ import annotations

import logging
import os
import sys

from ..text import shown


PROG = "tdbfs"


DEFAULT_CACHE_MB = 512


class CliError(Exception):
    """A failure to report as one line `tdbfs: error: ...`."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def error(message: str) -> None:
    message = " ".join(shown(str(message)).split())  # always one line
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


def load_key(key_file: str | None):
    """The encryption key from --key-file, else from the environment, else None; never from argv."""
    from ..format.reversers.keys import BadKeyError, key_from_environment, read_key_file

    try:
        return read_key_file(key_file) if key_file else key_from_environment()
    except BadKeyError as exc:
        raise CliError(str(exc)) from None


def open_store(array: str, cache_mb: int, key_file: str | None = None, key=None):
    from ..store import NotAnArrayError, open_array

    if key is None:
        key = load_key(key_file)
    try:
        return open_array(array, cache_bytes=cache_mb << 20, key=key)
    except FileNotFoundError as exc:
        raise CliError(message_of(exc, f"array not found: {array}")) from None
    except NotAnArrayError as exc:
        raise CliError(message_of(exc, f"not a TileDB array: {array}")) from None
    except PermissionError as exc:
        raise CliError(f"cannot read {array}: {exc.strerror}") from None


def message_of(exc: Exception, default: str) -> str:
    text = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else ""
    return text if text and len(exc.args) == 1 else default


def open_root(array: str, cache_mb: int = DEFAULT_CACHE_MB, key_file: str | None = None):
    from ..views.tree import build_root

    # ls/cat/tree report a failing view in their own one-line error; without this,
    # Python's last-resort handler would also print the views' log warning.
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    return build_root(open_store(os.path.abspath(array), cache_mb, key_file))


def root_of(args):
    # key_file only when given, so that open_root(array, cache_mb) stays the whole interface otherwise
    if args.key_file:
        return open_root(args.array, args.cache_mb, key_file=args.key_file)
    return open_root(args.array, args.cache_mb)
