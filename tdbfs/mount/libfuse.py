"""mfusepy, loaded on the libfuse `fuse_setup.choose_libfuse` picks: libfuse3 when it can be found
(256 KiB reads instead of 128 KiB, docs/performance.md §2), else libfuse2; and why a mount cannot
work here when it cannot."""

from __future__ import annotations

import os
from typing import Optional

from .fuse_setup import choose_libfuse, setup_problem


def _import_mfusepy():
    """Import mfusepy on the libfuse chosen by `choose_libfuse`, leaving os.environ as it was."""
    _major, path = choose_libfuse()
    saved = os.environ.get("FUSE_LIBRARY_PATH")
    if path and not saved:
        os.environ["FUSE_LIBRARY_PATH"] = path
    try:
        import mfusepy as module
        return module, None
    except Exception as exc:  # no libfuse at all, or an unsupported one
        return None, exc
    finally:
        if saved is None:
            os.environ.pop("FUSE_LIBRARY_PATH", None)


mfusepy, _MFUSEPY_ERROR = _import_mfusepy()

if mfusepy is not None:
    _OperationsBase = mfusepy.Operations
    FuseOSError = mfusepy.FuseOSError
else:  # the adapter still works (for unit tests); mounting reports fuse_problem()
    _OperationsBase = object

    class FuseOSError(OSError):  # type: ignore[no-redef]
        def __init__(self, err):
            super().__init__(err, os.strerror(err))


def fuse_problem() -> Optional[str]:
    """Why a mount cannot work here (one line, with how to fix it), or None if it can."""
    _major, path = choose_libfuse()
    if path is not None and mfusepy is None:
        return (f"cannot load libfuse from {path} ({_MFUSEPY_ERROR}); install it: apt-get install fuse3, "
                "or apt-get install libfuse2")
    return setup_problem()


def libfuse_version() -> Optional[tuple[int, int]]:
    """(major, minor) of the libfuse mfusepy loaded, or None."""
    if mfusepy is None:
        return None
    return mfusepy.fuse_version_major, mfusepy.fuse_version_minor
