"""Where an array is: a local path or an object store's URL, told apart by the one test the store
and the front ends share.

Kept apart from tdbfs.store so that a front end can tell a URL from a path without importing the
store (numpy starts threads at import, and `tdbfs mount -f` must block its stop signals first).
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

#: URL scheme -> the family of object stores it names (remote.py's backends, and the -o option prefix)
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "az", "abfs": "az", "abfss": "az"}

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(location: str) -> bool:
    """Whether `location` names an object store (a scheme tdbfs knows) rather than a local path."""
    m = _URL.match(location)
    return m is not None and m.group(1).lower() in SCHEMES


LOCAL = "local"


class Location(namedtuple("Location", "text kind path scheme bucket key", defaults=(None, None, None))):
    """Where an array or group is, parsed once by the front end that was given it and passed down.

    `text`: as the user wrote it; `kind`: "local", or the family of object stores ("s3", "gcs", "az");
    `path`: what the store opens, a local path made absolute or the URL as written; `scheme`, `bucket`
    and `key` (the path inside the bucket, without slashes at its ends): parts of a URL, None for a
    local path. Immutable; a named tuple rather than a dataclass because `tdbfs mount` makes one before
    it starts its daemon, and `dataclasses` (with `inspect`) is ~13 ms of imports there
    (docs/performance.md §5)."""

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> Location:
        text = os.fspath(text)
        m = _URL.match(text)
        if m is None or m.group(1).lower() not in SCHEMES:
            return cls(text, LOCAL, os.path.abspath(text))
        scheme = m.group(1).lower()
        bucket, _, key = text[m.end():].strip("/").partition("/")
        return cls(text, SCHEMES[scheme], text, scheme, bucket, key.strip("/"))

    @classmethod
    def of(cls, location: Location | str) -> Location:
        """`location` itself, or the text parsed."""
        return location if isinstance(location, Location) else cls.parse(location)

    @property
    def remote(self) -> bool:
        """Whether it names an object store rather than a local path."""
        return self.kind != LOCAL

    def __str__(self) -> str:
        return self.path

    def __fspath__(self) -> str:
        return self.path
