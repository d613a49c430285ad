"""Mounting tdbfs in tests, and proving the array was left alone.

    with mounted(array_path) as mnt:      # runs `python -m tdbfs.cli mount ARRAY MNT`
        (mnt / "array.yaml").read_text()
    # always unmounted here, even when the body raised

    before = snapshot_tree(array_path)
    ...
    assert_unchanged(before, snapshot_tree(array_path))
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

#: seconds allowed for `tdbfs mount` to return and for unmounting
MOUNT_TIMEOUT = float(os.environ.get("TDBFS_TEST_MOUNT_TIMEOUT", "60"))
UMOUNT_TIMEOUT = 20.0


def tdbfs_command() -> list[str]:
    """The tdbfs CLI as the tests run it (the interpreter running the tests)."""
    return [sys.executable, "-m", "tdbfs.cli"]


def is_mounted(path: str | os.PathLike) -> bool:
    """True when `path` is a mount point (checked in /proc/self/mountinfo, which
    works even when the file system no longer answers)."""
    target = os.path.realpath(os.fspath(path))
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 4 and _unescape(parts[4]) == target:
                    return True
    except OSError:
        pass
    try:
        return os.path.ismount(target)
    except OSError:
        return False


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _run(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(list(cmd), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def unmount(mnt: str | os.PathLike, *, use_cli: bool = True) -> list[str]:
    """Unmount `mnt` by any means: `tdbfs umount`, then fusermount3 -u -z,
    fusermount -u -z, umount -l. Returns the log of what was tried (for messages)."""
    mnt = os.fspath(mnt)
    log: list[str] = []
    attempts: list[list[str]] = []
    if use_cli:
        attempts.append(tdbfs_command() + ["umount", mnt])
    for tool, args in (("fusermount3", ["-u", "-z"]), ("fusermount", ["-u", "-z"]), ("umount", ["-l"])):
        exe = shutil.which(tool)
        if exe:
            attempts.append([exe, *args, mnt])
    for cmd in attempts:
        if not is_mounted(mnt):
            break
        res = _run(cmd, UMOUNT_TIMEOUT)
        log.append(f"{' '.join(cmd)} -> " + ("timeout/failed to start" if res is None else
                                             f"rc={res.returncode} {res.stderr.strip()[-300:]}"))
        # a lazy unmount can take a moment to show in mountinfo
        deadline = time.monotonic() + 5
        while is_mounted(mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
    return log


@contextlib.contextmanager
def mounted(array_path: str | os.PathLike, mountpoint: str | os.PathLike | None = None, *,
            command: Sequence[str] | None = None, extra_args: Sequence[str] = (),
            env: dict[str, str] | None = None) -> Iterator[Path]:
    """Mount `array_path` with `tdbfs mount ARRAY MNT` (the CLI returns once the
    mount answers; the daemon keeps running) and yield MNT as a Path. On exit the
    mount is ALWAYS removed (tdbfs umount, then fusermount3/fusermount -u -z, then
    umount -l) and a mount point this function created is deleted.

    `command` replaces the mount command: the array and mount point are appended
    (used by the tests of this helper). `extra_args` go after MNT."""
    made_dir = mountpoint is None
    mnt = Path(tempfile.mkdtemp(prefix="tdbfs-mnt-")) if made_dir else Path(mountpoint)
    mnt.mkdir(parents=True, exist_ok=True)
    cmd = list(command) if command is not None else tdbfs_command() + ["mount"]
    cmd += [os.fspath(array_path), os.fspath(mnt), *extra_args]
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    try:
        try:
            res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=MOUNT_TIMEOUT, env=run_env)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"mount command did not return within {MOUNT_TIMEOUT}s: {cmd}\n"
                                 f"stdout: {exc.stdout}\nstderr: {exc.stderr}") from None
        if res.returncode != 0:
            raise AssertionError(f"mount command failed (rc={res.returncode}): {' '.join(cmd)}\n"
                                 f"stdout: {res.stdout}\nstderr: {res.stderr}")
        if not is_mounted(mnt):
            raise AssertionError(f"mount command returned 0 but {mnt} is not a mount point\n"
                                 f"stdout: {res.stdout}\nstderr: {res.stderr}")
        yield mnt
    finally:
        log = unmount(mnt, use_cli=command is None)
        still = is_mounted(mnt)
        if made_dir and not still:
            with contextlib.suppress(OSError):
                mnt.rmdir()
        if still:
            raise AssertionError(f"could not unmount {mnt}: " + "; ".join(log))


# ---------------------------------------------------------------------------
# snapshots


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def snapshot_tree(root: str | os.PathLike) -> dict[str, tuple]:
    """Every entry under `root` (root included as "."): relative path ->
    ("file", size, mtime_ns, mode, sha256) / ("dir", mtime_ns, mode) /
    ("link", target). Access times are left out (reading may update them)."""
    root = Path(root)
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dp = Path(dirpath)
        st = dp.lstat()
        out[os.path.relpath(dp, root)] = ("dir", st.st_mtime_ns, st.st_mode)
        for name in sorted(filenames) + [d for d in dirnames if (dp / d).is_symlink()]:
            p = dp / name
            rel = os.path.relpath(p, root)
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            else:
                out[rel] = ("file", st.st_size, st.st_mtime_ns, st.st_mode, _sha256(p))
    return out


def diff_snapshots(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    lines = []
    for k in sorted(set(before) | set(after)):
        if k not in after:
            lines.append(f"removed: {k}")
        elif k not in before:
            lines.append(f"added: {k}")
        elif before[k] != after[k]:
            lines.append(f"changed: {k}: {before[k]} -> {after[k]}")
    return lines


def assert_unchanged(before: dict[str, tuple], after: dict[str, tuple]) -> None:
    diff = diff_snapshots(before, after)
    assert not diff, "array directory changed:\n" + "\n".join(diff)


def daemon_pids(mnt, spawned_only: bool = False) -> list[int]:
    """Processes running `tdbfs mount` for the mount point `mnt` (found by their argv); with
    `spawned_only`, only background daemons. A background daemon is a fork of `tdbfs mount ... ARRAY MNT`
    and has its argv, or, where a secret is in play, a new `tdbfs.cli mount -f --spawned ... -- ARRAY MNT`
    (cli/daemon_start.py); `tdbfs mount -f` is a daemon in the foreground."""
    target = os.path.realpath(os.fspath(mnt))
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        command = any(a in ("tdbfs", "tdbfs.cli") or os.path.basename(a) == "tdbfs" for a in argv[:4])
        if not command or "mount" not in argv or not any(os.path.realpath(a) == target for a in argv):
            continue
        if spawned_only and "--spawned" not in argv and ("-f" in argv or "--foreground" in argv):
            continue
        out.append(int(pid))
    return out


def tree_contents(mnt, replace: tuple[str, str] = ("", "")) -> dict[str, bytes]:
    """Every folder (its sorted names) and every file's bytes under a mount, with `replace` applied
    to the bytes (a remote mount names its URL where the local one names its folder)."""
    out: dict[str, bytes] = {}
    old, new = (s.encode() for s in replace)
    for folder, dirs, files in os.walk(mnt):
        rel = os.path.relpath(folder, mnt)
        dirs.sort()
        out[rel + "/"] = "\n".join(sorted(dirs + files)).encode()
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                out[f"{rel}/{name}"] = os.readlink(path).encode()
            else:
                with open(path, "rb") as f:
                    data = f.read()
                out[f"{rel}/{name}"] = data.replace(old, new) if old else data
    return out
