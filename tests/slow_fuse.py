"""tdbfs's own FUSE loop (mount/fuse_loop.serve, in the foreground, with a local array's threads) over a
tiny tree with one file whose render takes as long as a test wants. Not part of tdbfs.

    python slow_fuse.py MOUNTPOINT STATE_DIR [-o OPTIONS]

- `fast.txt` (FAST) and `names/` (NAMES, empty files) answer at once;
- `slow.bin` (SLOW_SIZE bytes of b"s") renders in pieces of about a millisecond of Python each, every piece
  asked of a store cache (`ByteLRU.get_or_make`, which checks the stop flag, store/stopping.py), as a
  render of the cells of millions of cells does; `spin.bin` the same, its pieces made without the cache
  (as the rows of one tile are), so only the daemon's interruption of the thread can end it. Once it has started it writes STATE_DIR/busy; it ends once
  STATE_DIR/go exists, and then writes STATE_DIR/done. A render that stopped writes STATE_DIR/stopped.

A test thus knows, with no timing, that a render is under way, and decides when it ends.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tdbfs.mount import libfuse  # noqa: E402
from tdbfs.mount.fuse_loop import serve  # noqa: E402
from tdbfs.mount.fuse_setup import FuseOptions  # noqa: E402
from tdbfs.mount.stop_signals import catch_stop_signals  # noqa: E402
from tdbfs.store.cache import ByteLRU  # noqa: E402
from tdbfs.store.stopping import Stopped  # noqa: E402
from tdbfs.views.nodes import FOREVER, BytesFile, FileNode, StaticDir  # noqa: E402

FAST = b"fast and correct\n"
NAMES = ("alpha", "beta", "gamma")
SLOW_SIZE = 1 << 20


def _touch(path: str) -> None:
    with open(path, "w"):
        pass


class SlowFile(FileNode):
    immutable = True

    def __init__(self, state: str, through_cache: bool = True):
        self.state, self.through_cache = state, through_cache
        self.cache = ByteLRU(1 << 20)
        self.pieces = 0

    def size(self) -> int:
        return SLOW_SIZE

    def _piece(self):
        n = 0
        for i in range(20000):   # about a millisecond of Python: the GIL changes hands meanwhile
            n += i
        return n, 1

    def read(self, offset: int, size: int) -> bytes:
        _touch(os.path.join(self.state, "busy"))
        try:
            while not os.path.exists(os.path.join(self.state, "go")):
                self.pieces += 1
                if self.through_cache:
                    self.cache.get_or_make(("piece", self.pieces), self._piece)
                else:
                    self._piece()
        except Stopped:
            _touch(os.path.join(self.state, "stopped"))
            raise
        _touch(os.path.join(self.state, "done"))
        return b"s" * max(0, min(size, SLOW_SIZE - offset))


def main(argv: list[str]) -> int:
    mnt, state = argv[1], argv[2]
    catch_stop_signals()   # before any thread starts, as `tdbfs mount -f` does
    options = FuseOptions.parse([argv[i + 1] for i, a in enumerate(argv) if a == "-o"])
    options.for_array(libfuse.libfuse_version())
    root = StaticDir(lambda: {
        "fast.txt": BytesFile(lambda: FAST, FOREVER),
        "names": StaticDir(lambda: {n: BytesFile(lambda: b"", FOREVER) for n in NAMES}, immutable=True),
        "slow.bin": SlowFile(state),
        "spin.bin": SlowFile(state, through_cache=False),
    })
    serve(root, mnt, options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
