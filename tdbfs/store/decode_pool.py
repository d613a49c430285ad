"""The thread that takes chunks of a big ZSTD tile beside the one decoding it (`format/zstd_tile.py`), in
the daemon only.

On 2 cores a `cat` of tile files is bound by zstd on the thread that decodes ahead; zstd releases the
GIL, so chunks taken by a second thread nearly double the decode rate of a 4 MiB tile while the FUSE
loop, which only copies decoded bytes, needs little CPU (docs/performance.md §3). The reader waiting
for the tile takes chunks too (`ByteLRU.offer_help`). `tdbfs check` runs
one worker process per core instead, so it leaves this off: two threads per worker would only fight.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("tdbfs.decode")
_pool: ThreadPoolExecutor | None = None


def enable() -> None:
    """Decode big ZSTD tiles on two threads from now on (the daemon calls this once)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(1, thread_name_prefix="tdbfs-decode")
        log.info("ZSTD tiles of 1 MiB and more decode on two threads")


def pool() -> ThreadPoolExecutor | None:
    """The pool for `unfilter_tile`, or None: decode on the calling thread alone."""
    return _pool


_numpy_thread = None


def warm_numpy() -> None:
    """Import numpy on a thread of its own, once: the first tile read needs it (tile offsets, min/max
    checks), and importing it then made that read wait 130-250 ms. A tile file's size is asked for
    before it is read (`ls -l`, `stat`, the kernel's lookup), so the import overlaps what comes before
    the read, while a mount's start-up and `ls fragments/` still import none of it."""
    global _numpy_thread
    if _numpy_thread is None:
        import threading
        _numpy_thread = threading.Thread(target=__import__, args=("numpy",), name="tdbfs-numpy", daemon=True)
        _numpy_thread.start()
