"""The storage of a location: a local folder, or a folder of an object store."""

from __future__ import annotations

import errno
import os
import stat

from . import Storage


def open_storage(location, settings=None) -> Storage:
    """The storage of the folder `location`, a local path or an object store's URL (s3://, gs://, gcs://,
    az://, abfs://; `settings`, a remote.RemoteSettings, says how to reach it, else each SDK's own
    credential chain and defaults): FileNotFoundError when nothing is there, NotADirectoryError when it is
    not a folder, remote.RemoteOpenError (one line) when the store cannot be used. A local location may be
    a symlink: the one the user named is followed."""
    from ...location import Location
    location = Location.of(location)
    if location.remote:
        from .remote import open_remote
        return open_remote(location.path, settings)
    from .local import LocalStorage

    path = location.path
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", path)
    return LocalStorage(path)
