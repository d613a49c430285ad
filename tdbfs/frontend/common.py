"""What every command shares: its one-line errors, and opening the array and its view."""

from __future__ import annotations

import sys

from ..location import Location
from ..text import shown


PROG = "tdbfs"


DEFAULT_CACHE_MB = 512


#: numpy's OpenBLAS starts a thread per core when numpy is imported, which spins for a while before it
#: sleeps: in a fresh daemon that spinning took a tenth of a CPU-second from the first tile reads
#: (perf). tdbfs does no linear algebra; a user's own setting wins (main sets it for every command).
BLAS_ENV = {"OPENBLAS_NUM_THREADS": "1"}


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
    from .keys import BadKeyError, key_from_environment, read_key_file

    try:
        return read_key_file(key_file) if key_file else key_from_environment()
    except BadKeyError as exc:
        raise CliError(str(exc)) from None


def open_store(location, cache_mb: int, key_file: str | None = None, key=None, remote=None, **settings):
    """The store of `location` (a Location, or the text of one: a local path or an object store's URL);
    `remote` (RemoteSettings) says how to reach a URL (else each SDK's own credential chain); `settings`
    the store's own, which it keeps from then on (store.open_object: drop_served, listings)."""
    from ..store import NotAnArrayError
    from ..store.open_array import open_array

    location = Location.of(location)
    array = location.path
    if key is None:
        key = load_key(key_file)
    try:
        if not location.remote:  # without importing the object-store backend: a mount's start-up
            return open_array(array, cache_bytes=cache_mb << 20, key=key, **settings)
        from ..store.open_array import open_location
        from ..store.storage.remote import RemoteOpenError
        try:
            return open_location(location, cache_mb << 20, key, remote, **settings)
        except RemoteOpenError as exc:
            raise CliError(str(exc)) from None
    except FileNotFoundError as exc:
        raise CliError(message_of(exc, f"array not found: {array}")) from None
    except NotAnArrayError as exc:
        raise CliError(message_of(exc, f"not a TileDB array: {array}")) from None
    except PermissionError as exc:
        raise CliError(f"cannot read {array}: {exc.strerror}") from None


def message_of(exc: Exception, default: str) -> str:
    text = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else ""
    return text if text and len(exc.args) == 1 else default


def open_root(location, cache_mb: int = DEFAULT_CACHE_MB, key_file: str | None = None, remote=None):
    """The view of `location` (a Location, or the text of one)."""
    import logging

    from ..views.tree import build_root

    # ls/cat/tree report a failing view in their own one-line error; without this,
    # Python's last-resort handler would also print the views' log warning.
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    return build_root(open_store(Location.of(location), cache_mb, key_file, remote=remote))
