"""Which locations name an object store: the one test the store and the command line share.

Kept apart from tdbfs.store so that the command line can tell a URL from a path without importing
the store (numpy starts threads at import, and `tdbfs mount -f` must block its stop signals first).
"""

from __future__ import annotations

import re

#: URL scheme -> the family of object stores it names (remote.py's backends, and the -o option prefix)
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "az", "abfs": "az", "abfss": "az"}

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(location: str) -> bool:
    """Whether `location` names an object store (a scheme tdbfs knows) rather than a local path."""
    m = _URL.match(location)
    return m is not None and m.group(1).lower() in SCHEMES
