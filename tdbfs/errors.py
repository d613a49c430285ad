"""The one family of errors tdbfs raises to its users (`tdbfs.TdbfsError`).

Below every layer so that each can make its own errors part of the family: the format layer's
FormatError (file, structure, offset), the store's NotAnArrayError, a remote store's RemoteOpenError,
a bad key's BadKeyError, a view's ViewError all derive from TdbfsError. Nothing is imported here:
`tdbfs mount` reads a key and lists folders before its daemon starts.
"""

from __future__ import annotations


class TdbfsError(Exception):
    """Any error tdbfs raises about an array, a group, a view or how to reach them."""


class NotFoundError(TdbfsError, FileNotFoundError):
    """Nothing at a location, or no such path in the tree; a FileNotFoundError too, so code written
    for files (fsspec, pandas) handles it as a missing file."""
