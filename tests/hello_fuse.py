"""A tiny read-only FUSE file system (one file, hello.txt) used to test the mount
helpers and that FUSE works on this machine. Not part of tdbfs.

    python hello_fuse.py IGNORED_SOURCE MOUNTPOINT

Like `tdbfs mount`, it returns once the mount is up; the daemon keeps serving.
"""

from __future__ import annotations

import errno
import stat
import sys
import time

import mfusepy

CONTENT = b"hello from fuse\n"


class Hello(mfusepy.Operations):
    use_ns = True

    def __init__(self) -> None:
        self.now = time.time_ns()

    def getattr(self, path, fh=None):
        t = self.now
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o555, st_nlink=2, st_atime=t, st_mtime=t, st_ctime=t)
        if path == "/hello.txt":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=len(CONTENT),
                        st_atime=t, st_mtime=t, st_ctime=t)
        raise mfusepy.FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "hello.txt"]

    def open(self, path, flags):
        if path != "/hello.txt":
            raise mfusepy.FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        return CONTENT[offset:offset + size]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    mfusepy.FUSE(Hello(), argv[2], foreground=False, ro=True, nothreads=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
