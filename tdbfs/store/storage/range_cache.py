"""`--cache-dir DIR`: byte ranges of remote files kept on disk, so a remount reads them without a request.

TileDB writes each file once and never changes it, so a range read from a file stays true for as
long as the file is the same object: the key is the file's URL with the version the listing gave
(its ETag, size and mtime) and the range. A file replaced under the same name has another version
and is read anew. Each range is one file named by the SHA-256 of its key, written to a temporary
name and renamed, so a reader never sees half a range and two daemons can share a folder. The key
holds no credentials (URLs carry none), and nothing but the bytes of the array is stored.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

__all__ = ["RangeCache"]


class RangeCache:
    """Byte ranges of immutable remote files under one folder (made if missing)."""

    def __init__(self, folder: str):
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, mode=0o700, exist_ok=True)

    def _path(self, url: str, version: tuple, offset: int, size: int) -> str:
        digest = hashlib.sha256(repr((url, version, offset, size)).encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.folder, digest[:2], digest[2:])

    def get(self, url: str, version: tuple, offset: int, size: int) -> bytes | None:
        """The bytes kept for this range of this version of the file, or None."""
        try:
            with open(self._path(url, version, offset, size), "rb") as f:
                return f.read()
        except OSError:
            return None

    def put(self, url: str, version: tuple, offset: int, size: int, data: bytes) -> None:
        """Keep the bytes; a cache that cannot be written (disk full, read-only) only costs requests later."""
        path = self._path(url, version, offset, size)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".part-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass
