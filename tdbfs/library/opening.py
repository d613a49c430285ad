"""`tdbfs.open(location)`: the store of a local path or an object store's URL, opened directly on the
store layer (store/open_array.py), wrapped as an Array, a Group or a Workspace."""

from __future__ import annotations

import os

from ..errors import NotFoundError
from .base import Opened

DEFAULT_CACHE_MB = 512


def open(location, *, key=None, storage_options: dict | None = None, cache_mb: int = DEFAULT_CACHE_MB):
    """Open the TileDB array, group or 0.x workspace at `location` (a local path, or an s3://, gs://,
    az:// URL) read-only: an Array, a Group or a Workspace, each usable as a context manager.

    `key`: the AES-256-GCM key of an encrypted array (32 bytes or characters, 64 hex digits or 44 base64
    characters), or None. `storage_options`: keyword arguments of the object store's fsspec filesystem
    (s3fs, gcsfs, adlfs), either flat (`{"endpoint_url": ...}`) or per protocol (`{"s3": {...}}`).
    `cache_mb`: the memory decoded structures and tiles may keep."""
    from ..location import is_url

    where = os.fspath(location)
    if not isinstance(where, str):
        where = where.decode()
    url = is_url(where)
    opened = Opened(where if url else os.path.abspath(where), int(cache_mb),
                    remote_settings(where, storage_options) if url else None, encryption_key(key))
    return wrap(open_store(opened), opened)


def encryption_key(key):
    """An EncryptionKey from what a user passes (str, bytes, or an EncryptionKey), or None."""
    if key is None:
        return None
    from ..format.reversers.keys import EncryptionKey, parse_key

    if isinstance(key, EncryptionKey):
        return key
    raw = key.encode() if isinstance(key, str) else bytes(key)
    return parse_key(raw, "the key given to tdbfs.open")


def remote_settings(url: str, storage_options: dict | None):
    """RemoteSettings for `url` from fsspec-style storage options (flat for the URL's protocol, or keyed
    by protocol as fsspec's chained URLs key them)."""
    from ..store.storage.remote import RemoteSettings
    from ..location import SCHEMES

    scheme = url.partition("://")[0].lower()
    options: dict = {}
    given = dict(storage_options or {})
    keyed = {k: v for k, v in given.items() if k in SCHEMES and isinstance(v, dict)}
    for name, value in keyed.items():
        options.setdefault(SCHEMES[name], {}).update(value)
        del given[name]
    if given:
        options.setdefault(SCHEMES[scheme], {}).update(given)
    return RemoteSettings(options=options)


def open_store(opened: Opened):
    """The store of `opened.location`; NotFoundError, NotAnArrayError or RemoteOpenError (TdbfsErrors)."""
    from ..store.open_array import open_location

    try:
        return open_location(opened.location, opened.cache_mb << 20, opened.key, opened.remote)
    except FileNotFoundError as exc:
        if isinstance(exc, NotFoundError):
            raise
        raise NotFoundError(f"nothing at {opened.location}") from None


def wrap(store, opened: Opened):
    """The library object for a store: Workspace (TileDB 0.x), Group or Array."""
    from ..store import ArrayStore

    if getattr(store, "legacy0x_layout", None) == "workspace":
        from .group import Workspace
        return Workspace(store, opened)
    if not isinstance(store, ArrayStore):   # a GroupStore (its module is imported only for a group)
        from .group import Group
        return Group(store, opened)
    from .array import Array
    return Array(store, opened)
