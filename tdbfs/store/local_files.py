"""The only code that opens an array's files on a local disk.

An array folder can hold anything: a symlink to /etc planted as a fragment folder, a FIFO
in place of a data file, a symlink to /dev/zero as fragment metadata. None of them is ever
followed or read. Every path is walked one component at a time from the array's root with
O_NOFOLLOW, so no symlink inside the array is followed, wherever it sits; a file is opened
with O_NONBLOCK (opening a FIFO never blocks) and read only when `fstat` on the open
descriptor says it is a regular file, and never past the size that `fstat` gave.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC

#: the kinds of entries a folder can hold, as shown in views and problems
REGULAR = "file"
FOLDER = "folder"


def kind_of(mode: int) -> str:
    """What an entry is, in words ('file', 'folder', 'symbolic link', 'FIFO', ...)."""
    if stat.S_ISREG(mode):
        return REGULAR
    if stat.S_ISDIR(mode):
        return FOLDER
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "unknown kind of file"


class NotRegularError(OSError):
    """The entry exists but is not a regular file (or a path component is not a real folder): never opened."""

    def __init__(self, path: str, kind: str, target: str | None = None):
        what = f"a {kind}" + (f" (to {target})" if target is not None else "")
        super().__init__(errno.EINVAL, f"{path} is {what}, not a regular file: it is never opened", path)
        self.kind = kind
        self.target = target


@dataclass(frozen=True)
class Entry:
    """One entry of a folder as `lstat` sees it (a symlink is a symlink, never what it points at)."""

    name: str
    kind: str          # kind_of(mode)
    size: int
    mtime_ns: int
    mode: int          # permission bits and type
    target: str | None = None   # for a symbolic link: where it points (read with readlink, never followed)

    @property
    def is_file(self) -> bool:
        return self.kind == REGULAR

    @property
    def is_dir(self) -> bool:
        return self.kind == FOLDER


class LocalFiles:
    """An array folder's files, opened only from `root` down, component by component."""

    def __init__(self, root: str):
        self.root = root

    # -- walking ----------------------------------------------------------------------
    def _open_dir(self, rel: str) -> int:
        """A descriptor of the folder `rel` (relative to the root), reached without following any symlink."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for part in _parts(rel):
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
            try:
                st = os.lstat(name, dir_fd=dfd)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "no such file", rel) from None
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

    # -- asking -----------------------------------------------------------------------
    def entries(self, rel: str = "") -> list[Entry]:
        """Every entry of the folder `rel`, sorted by name, as lstat sees it; [] if there is no such folder."""
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

    def _scan(self, rel: str, keep) -> list[str]:
        """Sorted names of the entries of `rel` that `keep(DirEntry)` accepts; [] if there is no such folder."""
        try:
            fd = self._open_dir(rel)
        except (FileNotFoundError, NotADirectoryError, NotRegularError):
            return []
        try:
            with os.scandir(fd) as it:
                return sorted(e.name for e in it if keep(e))
        finally:
            os.close(fd)

    def names(self, rel: str = "") -> list[str]:
        """Names in the folder `rel`, whatever they are, without a stat each."""
        return self._scan(rel, lambda e: True)

    def subdirs(self, rel: str = "") -> list[str]:
        """Names of the real folders (not symlinks to folders) in `rel`: d_type answers without a stat each."""
        return self._scan(rel, lambda e: e.is_dir(follow_symlinks=False))

    def regular_names(self, rel: str = "") -> list[str]:
        """Names of the regular files in `rel` (__commits/ of 10,000 fragments: no stat each)."""
        return self._scan(rel, lambda e: e.is_file(follow_symlinks=False))

    def lstat(self, rel: str) -> os.stat_result:
        """lstat of `rel`, reached without following a symlink on the way; FileNotFoundError if absent."""
        if not rel:
            return os.stat(self.root)
        head, _, name = rel.rpartition("/")
        dfd = self._open_dir(head)
        try:
            return os.lstat(name, dir_fd=dfd)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file", rel) from None
        finally:
            os.close(dfd)

    def entry(self, rel: str) -> Entry | None:
        """The entry at `rel`, or None when there is none."""
        try:
            st = self.lstat(rel)
        except (FileNotFoundError, NotADirectoryError, NotRegularError):
            return None
        target = None
        if stat.S_ISLNK(st.st_mode):
            head, _, name = rel.rpartition("/")
            try:
                dfd = self._open_dir(head)
            except OSError:
                dfd = None
            if dfd is not None:
                try:
                    target = _readlink(name, dfd)
                finally:
                    os.close(dfd)
        return Entry(rel.rpartition("/")[2], kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_mode, target)

    def is_dir(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and e.is_dir

    def is_file(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and e.is_file

    def file_size(self, rel: str) -> int:
        """Size of the regular file `rel` (lstat; NotRegularError for anything else)."""
        return self.regular_stat(rel).st_size

    def regular_stat(self, rel: str) -> os.stat_result:
        """lstat of the regular file `rel`; NotRegularError (naming a link's target) for anything else."""
        st = self.lstat(rel)
        if not stat.S_ISREG(st.st_mode):
            e = self.entry(rel)
            raise NotRegularError(rel, kind_of(st.st_mode), e.target if e is not None else None)
        return st

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        """At most `size` bytes of the regular file `rel` from `offset`: never past the size fstat gives,
        so a length read from a damaged file never sizes an allocation beyond the file."""
        if offset < 0 or size < 0:
            raise ValueError(f"negative range {offset}+{size} of {rel}")
        fd, st = self._open_file(rel)
        try:
            size = max(0, min(size, st.st_size - offset))
            return _pread_all(fd, size, offset)
        finally:
            os.close(fd)

    def read(self, rel: str) -> tuple[bytes, os.stat_result]:
        """The whole regular file `rel` (as far as fstat's size), with that fstat."""
        fd, st = self._open_file(rel)
        try:
            return _pread_all(fd, st.st_size, 0), st
        finally:
            os.close(fd)


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


def _readlink(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileNotFoundError(errno.ENOENT, "'..' is never followed out of the array", rel)
    return parts
