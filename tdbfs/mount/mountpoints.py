"""Mount points: what is mounted where, whether a folder can take a mount, and unmounting."""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess

from ..frontend.common import CliError


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_fstype(path: str) -> str | None:
    """The file system type mounted exactly at `path` ('fuse.tdbfs', ...), or None."""
    real = os.path.realpath(path)
    found = None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                fields = left.split()
                if sep and len(fields) >= 5 and _unescape_mountinfo(fields[4]) == real:
                    found = right.split()[0] if right.split() else "?"
    except OSError:
        try:
            return "?" if os.path.ismount(path) else None
        except OSError:
            return None
    return found


def check_mountpoint(mnt: str, array) -> None:
    """CliError where `mnt` cannot take the mount of `array` (a Location)."""
    try:
        st = os.stat(mnt)
    except FileNotFoundError:
        raise CliError(f"mount point not found: {mnt}") from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise CliError(f"mount point {mnt} is a stale FUSE mount (its daemon is gone): "
                           f"run 'tdbfs umount {mnt}' first") from None
        raise CliError(f"cannot use mount point {mnt}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CliError(f"mount point is not a folder: {mnt}")
    if mount_fstype(mnt) is not None or os.path.ismount(mnt):
        try:
            os.listdir(mnt)
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:
                raise CliError(f"mount point {mnt} is a stale FUSE mount (its daemon is gone): "
                               f"run 'tdbfs umount {mnt}' first") from None
        raise CliError(f"mount point {mnt} is busy: something is already mounted there")
    try:
        if os.listdir(mnt):
            raise CliError(f"mount point {mnt} is not empty")
    except PermissionError:
        raise CliError(f"cannot use mount point {mnt}: permission denied") from None
    if array.remote:   # an object store's URL: no local folder to be inside of
        return
    real_mnt, real_array = os.path.realpath(mnt), os.path.realpath(array.path)
    if os.path.commonpath([real_mnt, real_array]) == real_array:
        raise CliError(f"mount point {mnt} must not be inside the array")


def unmount(mnt: str, lazy: bool = False) -> tuple[bool, str]:
    import shutil   # here: with bz2 and lzma it is ~3 ms of `tdbfs mount`, which never unmounts

    attempts = []
    if shutil.which("fusermount3"):
        attempts.append(["fusermount3", "-u"] + (["-z"] if lazy else []))
    if shutil.which("fusermount"):
        attempts.append(["fusermount", "-u"] + (["-z"] if lazy else []))
    if shutil.which("umount"):
        attempts.append(["umount"] + (["-l"] if lazy else []))
    message = "no unmount tool found (install fuse3: apt-get install fuse3)"
    for cmd in attempts:
        try:
            res = subprocess.run(cmd + [mnt], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            message = str(exc)
            continue
        if res.returncode == 0:
            return True, ""
        text = (res.stderr or res.stdout).strip().splitlines()
        message = text[-1] if text else f"{cmd[0]} exited with status {res.returncode}"
        if "busy" in message.lower():
            break
    return False, message
