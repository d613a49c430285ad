"""This process is shutting down: work in progress gives up at its next piece.

A mount's daemon sets `STOP` once its mount is gone (mount/shutdown.py). A render of seconds (the cells of
a tile of millions of cells, the summaries of thousands of fragments) is made of pieces, each asked of the
store's cache (`ByteLRU.get_or_make`), which checks the flag first: the render then ends within one piece
instead of running to its end for a reader that is gone. A loop that makes pieces without the cache may
call `check()` between them.

`Stopped` derives from BaseException, as asyncio's CancelledError does: it is no failure of the array, so
the handlers that turn an error into a problem of the array (`except Exception`) let it pass, and no
finding is recorded for a render cut short.
"""

from __future__ import annotations

import threading

#: set once, never cleared: the process is on its way out
STOP = threading.Event()


class Stopped(BaseException):
    """Work given up because the process is shutting down (`STOP` is set)."""


def check() -> None:
    """Raise Stopped once the process is shutting down; a flag read otherwise."""
    if STOP.is_set():
        raise Stopped()
