"""An array folder on a local disk.

Every path is walked one component at a time from the root with O_NOFOLLOW, so no symlink inside
the array is followed, wherever it sits (a group's member outside the group's folder is walked so
from the deepest folder it shares with the group's own path, `named`); a file is lstat'ed before it is opened (opening some
devices has effects), opened with O_NONBLOCK (opening a FIFO never blocks) and read only when
`fstat` on the open descriptor says it is a regular file, and never past the size `fstat` gave.
"""

from __future__ import annotations

import errno
import os
import stat

from . import Entry, NotRegularError, Storage, kind_of, path_parts

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC


class LocalStorage(Storage):
    """A folder's files, opened only from `root` (an absolute path) down, component by component.

    `named` (an ancestor of `root`, or `root` itself, the default) is the part of the path opened as
    the user named it, symlinks and all; the rest of `root` is walked like any path inside it, never
    through a symlink, on every open: a group member's folder, whose path the group's writer chose."""

    def __init__(self, root: str, named: str | None = None):
        self.root = root
        self.uri = root
        self.named = root if named is None else named
        self._below = [] if named is None else path_parts(os.path.relpath(root, named).replace(os.sep, "/"))

    def child(self, rel: str) -> "LocalStorage":
        return LocalStorage(os.path.join(self.root, *path_parts(rel)), self.named)

    def access_mask(self) -> int:
        return access_mask(self.root)

    # -- walking ----------------------------------------------------------------------
    def _open_dir(self, rel: str) -> int:
        """A descriptor of the folder `rel` (relative to the root), reached without following any symlink."""
        return self._walk(self._below + path_parts(rel), rel or self.root)

    def _walk(self, parts: list[str], rel: str) -> int:
        """A descriptor of the folder `parts` below `named`; errors name `rel`."""
        fd = os.open(self.named, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for part in parts:
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        self._raise_not_dir(fd, part, rel)
                    if exc.errno == errno.ENOENT:
                        raise FileNotFoundError(errno.ENOENT, "no such folder", rel) from None
                    raise
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _raise_not_dir(self, dir_fd: int, part: str, rel: str):
        try:
            st = os.lstat(part, dir_fd=dir_fd)
        except OSError:
            raise FileNotFoundError(errno.ENOENT, "no such folder", rel) from None
        kind = kind_of(st.st_mode)
        target = _readlink(part, dir_fd) if stat.S_ISLNK(st.st_mode) else None
        raise NotRegularError(rel, kind, target) from None

    def _open_file(self, rel: str) -> tuple[int, os.stat_result]:
        """(descriptor, fstat) of the regular file `rel`; NotRegularError for anything else."""
        head, _, name = rel.rpartition("/")
        if not name:
            raise FileNotFoundError(errno.ENOENT, "no file name", rel)
        dfd = self._open_dir(head)
        try:
            # lstat first: a device is never even opened (opening some has effects); O_NOFOLLOW and
            # the fstat below close the race with an entry swapped in between
            st = _lstat_at(dfd, name, rel)
            if not stat.S_ISREG(st.st_mode):
                self._raise_not_file(dfd, name, rel)
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    self._raise_not_file(dfd, name, rel)
                raise
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularError(rel, kind_of(st.st_mode))
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _raise_not_file(self, dir_fd: int, name: str, rel: str):
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except OSError:
            raise FileNotFoundError(errno.ENOENT, "no such file", rel) from None
        target = _readlink(name, dir_fd) if stat.S_ISLNK(st.st_mode) else None
        raise NotRegularError(rel, kind_of(st.st_mode), target) from None

    # -- the primitives ------------------------------------------------------------------
    def entries(self, rel: str = "") -> list[Entry]:
        try:
            fd = self._open_dir(rel)
        except (FileNotFoundError, NotADirectoryError, NotRegularError):
            return []
        out = []
        try:
            with os.scandir(fd) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue  # vanished between the listing and the stat
                    target = _readlink(e.name, fd) if stat.S_ISLNK(st.st_mode) else None
                    out.append(Entry(e.name, kind_of(st.st_mode), st.st_size, st.st_mtime_ns,
                                     st.st_mode, target))
        finally:
            os.close(fd)
        out.sort(key=lambda e: e.name)
        return out

    def gone(self, rel: str) -> bool:
        # one lstat of the path as it is, a twentieth of `stat`'s walk (which opens every folder on the way
        # to refuse symlinks): a path that exists through a symlink is not "gone", and `stat` refuses it
        try:
            os.lstat(f"{self.root}/{rel}")
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False

    def stat(self, rel: str) -> Entry:
        parts = self._below + path_parts(rel)
        if not parts:
            st = os.stat(self.named)
            return Entry("", kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_mode)
        name = parts[-1]
        dfd = self._walk(parts[:-1], rel or self.root)
        try:
            st = _lstat_at(dfd, name, rel)
            target = _readlink(name, dfd) if stat.S_ISLNK(st.st_mode) else None
        finally:
            os.close(dfd)
        return Entry(name if rel else "", kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_mode, target)

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise ValueError(f"negative range {offset}+{size} of {rel}")
        fd, st = self._open_file(rel)
        try:
            size = max(0, min(size, st.st_size - offset))
            return _pread_all(fd, size, offset)
        finally:
            os.close(fd)

    def read(self, rel: str) -> bytes:
        fd, st = self._open_file(rel)
        try:
            return _pread_all(fd, st.st_size, 0)
        finally:
            os.close(fd)

    # -- the listings by kind from d_type, without a stat each (__fragments/ of 10,000 fragments) --------
    def _scan(self, rel: str, keep) -> list[str]:
        try:
            fd = self._open_dir(rel)
        except (FileNotFoundError, NotADirectoryError, NotRegularError):
            return []
        try:
            with os.scandir(fd) as it:
                # the DirEntry method itself as the test: no Python frame per entry
                names = [e.name for e in it] if keep is None else [e.name for e in it if keep(e, follow_symlinks=False)]
        finally:
            os.close(fd)
        names.sort()
        return names

    def names(self, rel: str = "") -> list[str]:
        return self._scan(rel, None)

    def subdirs(self, rel: str = "") -> list[str]:
        return self._scan(rel, os.DirEntry.is_dir)

    def regular_names(self, rel: str = "") -> list[str]:
        return self._scan(rel, os.DirEntry.is_file)


def access_mask(path: str) -> int:
    """The read/execute bits anyone who can read the folder at `path` may get in a view of it.

    A class (owner, group, others) keeps r-x when it may list the folder (r) and reach it: x on
    the folder and on every folder above it. Otherwise it gets nothing, so that a mount others may
    enter (`-o allow_other`) shows no one more than the folder's own permissions do."""
    real = os.path.realpath(path)
    mode = os.stat(real).st_mode
    mask = 0
    for shift in (6, 3, 0):  # owner, group, others
        if mode & (0o4 << shift):
            mask |= 0o5 << shift
    folder = real
    while True:
        st = os.stat(folder)
        for shift in (6, 3, 0):
            if not st.st_mode & (0o1 << shift):
                mask &= ~(0o7 << shift)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return mask


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    if size <= 0:
        return b""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break  # the file shrank since fstat: the caller sees a short read
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _lstat_at(dir_fd: int, name: str, rel: str) -> os.stat_result:
    """lstat of `name` in the open folder `dir_fd`; FileNotFoundError naming `rel` when absent."""
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", rel) from None


def _readlink(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None
