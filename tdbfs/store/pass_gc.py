"""The garbage collector held back during a summary's pass over many fragments.

A pass over 100,000 footers allocates millions of small objects (parsed footers, cursors, digests) that
refcounting frees or that live on in the digest table; with CPython's default thresholds the collector
runs a full collection every time the objects that survived grew by a quarter, each one scanning every
digest and parsed structure kept so far: a large share of a pass's CPU seconds in the library or in a
digest worker. The mount's daemon raises the thresholds for good
(mount/daemon.py); a pass raises them to the same while it runs, in any process, and puts back what it
found. Nothing is left uncollected: a collection runs again under the old thresholds after the pass.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

#: the daemon's own thresholds (mount/daemon.py): a young collection every 100,000 allocations, a full one
#: practically never within a pass
PASS_THRESHOLDS = (100_000, 50, 1000)

_lock = threading.Lock()
_depth = 0
_saved: tuple | None = None


@contextmanager
def fewer_collections():
    """Within: the collector's thresholds at least PASS_THRESHOLDS (passes may nest, and run in threads:
    the thresholds found before the first are put back after the last)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_saved, PASS_THRESHOLDS)))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
