"""Real mounts with the CLI: stopping the daemon with signals, handing it the key, what
`mount`/`df` show as the source, and the modes others see with -o allow_other."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import arrays
import mounting
from mounting import is_mounted, tdbfs_command, unmount

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = arrays.ENCRYPTION_KEY


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TDBFS_")}
    env["PYTHONPATH"] = ROOT_DIR
    env.update(extra)
    return env


def _wait(predicate, timeout=15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _answers(mnt) -> bool:
    if not is_mounted(mnt):
        return False
    try:
        os.listdir(mnt)
        return True
    except OSError:
        return False


def mount_source(mnt) -> str | None:
    """The source (`mount`'s first column) of the mount at `mnt`, from /proc/self/mountinfo."""
    real = os.path.realpath(mnt)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _sep, right = line.rstrip("\n").partition(" - ")
            if _unescape(left.split()[4]) == real:
                return _unescape(right.split()[1])
    return None


def _unescape(field: str) -> str:
    import re
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    unmount(path)
    assert not is_mounted(path)


class Foreground:
    """`tdbfs mount -f ARRAY MNT` as a child process, up once the mount answers."""

    def __init__(self, array, mnt, *args, env=None):
        self.mnt = mnt
        self.proc = subprocess.Popen(tdbfs_command() + ["mount", "-f", *map(str, args), str(array), str(mnt)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env or _env())
        if not _wait(lambda: self.proc.poll() is not None or _answers(mnt)):
            self.proc.kill()
        if self.proc.poll() is not None:
            out, err = self.proc.communicate()
            raise AssertionError(f"mount -f exited with {self.proc.returncode}: {err.decode()}")

    def stop(self, signum, timeout=15) -> tuple[int, str]:
        self.proc.send_signal(signum)
        try:
            _out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
            raise AssertionError(f"still running {timeout} s after {signal.Signals(signum).name}: {err.decode()}")
        return self.proc.returncode, err.decode()


# --------------------------------------------------------------------------- signals

@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 0), (signal.SIGINT, 130), (signal.SIGHUP, 0)])
def test_foreground_mount_stops_quietly_on_signal(array_factory, mnt, signum, code):
    built = array_factory("sparse")
    fg = Foreground(built.path, mnt)
    assert (mnt / "array.yaml").read_bytes()
    rc, err = fg.stop(signum)
    assert rc == code, err
    assert "could not mount" not in err and "error" not in err.lower() and "Traceback" not in err, err
    assert f"unmounted {mnt} on {signal.Signals(signum).name}" in err
    assert not is_mounted(mnt)


def test_stop_signal_with_a_file_open_detaches_and_exits_without_waiting_for_it(array_factory, mnt):
    """A stop signal ends the daemon even while a reader holds a file open and reads no more (a lazy
    unmount alone would leave it serving until the file is closed): the reader's next read fails."""
    built = array_factory("sparse")
    fg = Foreground(built.path, mnt)
    f = open(mnt / "array.yaml", "rb")
    try:
        head = f.read(10)
        assert len(head) == 10
        fg.proc.send_signal(signal.SIGTERM)
        _out, err = fg.proc.communicate(timeout=15)   # ends with the file still open
        err = err.decode()
        assert fg.proc.returncode == 0, err
        assert not is_mounted(mnt)
        assert "could not mount" not in err and "Traceback" not in err and "exiting now" not in err, err
        with pytest.raises(OSError) as caught:
            f.seek(0)
            f.read()
        assert caught.value.errno in (errno.ENOTCONN, errno.EINTR), caught.value
    finally:
        with contextlib.suppress(OSError):
            f.close()


def test_failed_mount_still_reports_libfuse_error(array_factory, mnt):
    built = array_factory("sparse")
    res = subprocess.run(tdbfs_command() + ["mount", "-f", "-o", "no_such_fuse_option", str(built.path), str(mnt)],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 1
    assert "tdbfs: error: libfuse could not mount" in res.stderr
    assert "no_such_fuse_option" in res.stderr  # libfuse's own message
    res = subprocess.run(tdbfs_command() + ["mount", "-o", "no_such_fuse_option", str(built.path), str(mnt)],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 1 and "libfuse could not mount" in res.stderr and "no_such_fuse_option" in res.stderr
    assert not is_mounted(mnt)


@contextlib.contextmanager
def adopting_orphans():
    """Make this process the reaper of orphans (the daemon `tdbfs mount` leaves behind), so
    that their exit status can be read with waitpid."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) is not available")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def daemon_pid(mnt) -> int:
    """The pid of the `tdbfs mount -f --spawned` serving `mnt`."""
    found = mounting.daemon_pids(mnt, spawned_only=True)
    assert len(found) == 1, found
    return found[0]


def test_background_daemon_stops_cleanly_on_sigterm(array_factory, mnt, tmp_path):
    built = array_factory("sparse")
    log = tmp_path / "daemon.log"
    with adopting_orphans():
        res = subprocess.run(tdbfs_command() + ["mount", "--log", str(log), str(built.path), str(mnt)],
                             capture_output=True, text=True, timeout=60, env=_env())
        assert res.returncode == 0, res.stderr
        pid = daemon_pid(mnt)
        assert (mnt / "array.yaml").read_bytes()
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "the daemon did not stop"
            time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0, log.read_text()
    assert not is_mounted(mnt)
    text = log.read_text()
    assert f"unmounted {mnt} on SIGTERM" in text and "ERROR" not in text, text


# --------------------------------------------------------------------------- keys

def _proc_bytes(pid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


@pytest.mark.parametrize("how", ["environment", "key_file_variable", "key_file_option"])
def test_key_reaches_the_daemon_only_through_a_pipe(array_factory, mnt, tmp_path, how):
    built = array_factory("encrypted")
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    args, env = [], _env()
    if how == "environment":
        env["TDBFS_ENCRYPTION_KEY"] = KEY
    elif how == "key_file_variable":
        env["TDBFS_KEY_FILE"] = str(key_file)
    else:
        args = ["--key-file", str(key_file)]
    log = tmp_path / "daemon.log"
    res = subprocess.run(tdbfs_command() + ["mount", "--debug", "--log", str(log), *args, str(built.path), str(mnt)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    (name,) = os.listdir(mnt / "fragments")
    tile = subprocess.run(["cat", str(mnt / "fragments" / name / "attrs" / "a0" / "tile_0.txt")],
                          capture_output=True, timeout=30)
    assert tile.returncode == 0 and tile.stdout.strip(), tile.stderr  # decrypted with the key
    pid = daemon_pid(mnt)
    environ, cmdline = _proc_bytes(pid, "environ"), _proc_bytes(pid, "cmdline")
    assert KEY.encode() not in environ and KEY.encode() not in cmdline
    assert b"TDBFS_ENCRYPTION_KEY" not in environ and b"TDBFS_KEY_FILE" not in environ
    assert str(key_file).encode() not in cmdline  # not even where the key is
    assert b"--key-fd" in cmdline
    # the pipe was read once and closed: no descriptor of the daemon is a pipe any more
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            assert not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"), fd
    assert KEY.encode() not in log.read_bytes()


def test_bad_key_is_reported_by_the_parent(array_factory, mnt):
    built = array_factory("encrypted")
    res = subprocess.run(tdbfs_command() + ["mount", str(built.path), str(mnt)], capture_output=True, text=True,
                         timeout=60, env=_env(TDBFS_ENCRYPTION_KEY="short"))
    assert res.returncode == 1 and "TDBFS_ENCRYPTION_KEY" in res.stderr and "short" not in res.stderr
    assert not is_mounted(mnt)


# --------------------------------------------------------------------------- fsname

@pytest.mark.parametrize("name", ["plain", "with space, comma and \\ backslash"])
def test_mount_source_is_the_array_path(array_factory, mnt, name):
    built = array_factory("sparse", name=name)
    res = subprocess.run(tdbfs_command() + ["mount", str(built.path), str(mnt)], capture_output=True, text=True,
                         timeout=60, env=_env())
    assert res.returncode == 0, res.stderr
    assert mount_source(mnt) == os.path.abspath(built.path)
    df = subprocess.run(["df", str(mnt)], capture_output=True, text=True, timeout=30)
    assert os.path.abspath(built.path) in df.stdout
    unmount(mnt)
    res = subprocess.run(tdbfs_command() + ["mount", "-o", "fsname=mine", str(built.path), str(mnt)],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 0, res.stderr
    assert mount_source(mnt) == "mine"


# --------------------------------------------------------------------------- modes

@pytest.fixture
def open_base():
    """A folder every user may walk to (pytest's tmp_path is under a folder only root may walk)."""
    base = Path(tempfile.mkdtemp(prefix="tdbfs-modes-"))
    base.chmod(0o755)
    (base / "mnt").mkdir()
    (base / "mnt").chmod(0o755)
    yield base
    unmount(base / "mnt")
    assert not is_mounted(base / "mnt")
    shutil.rmtree(base, ignore_errors=True)


def _as_nobody_cat(path) -> subprocess.CompletedProcess | None:
    if not shutil.which("setpriv") or os.getuid() != 0:
        return None
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(path)],
                          capture_output=True, text=True, errors="replace", timeout=30)


def _mount_allow_other(array, mnt):
    res = subprocess.run(tdbfs_command() + ["mount", "-o", "allow_other", str(array), str(mnt)],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("mode,expected_dir,expected_file", [
    (0o755, "555", "444"), (0o750, "550", "440"), (0o700, "500", "400")])
def test_views_keep_the_array_folder_permissions(open_base, mode, expected_dir, expected_file):
    mnt = open_base / "mnt"
    built = arrays.make_array(open_base, "sparse")
    os.chmod(built.path, mode)
    _mount_allow_other(built.path, mnt)
    frag = sorted(os.listdir(mnt / "fragments"))[0]
    for path, want in ((mnt, expected_dir), (mnt / "fragments" / frag, expected_dir),
                       (mnt / "array.yaml", expected_file),
                       (mnt / "fragments" / frag / "attrs" / "a0" / "tile_0.bin", expected_file)):
        assert oct(os.stat(path).st_mode & 0o777)[2:] == want, path
    # another user reads exactly what the array's own permissions let it read
    res = _as_nobody_cat(mnt / "array.yaml")
    if res is not None:
        direct = _as_nobody_cat(next(p for p in sorted((built.path / "__schema").iterdir()) if p.is_file()))
        assert (res.returncode == 0) == (direct.returncode == 0) == (mode == 0o755), res.stderr


def test_views_hide_an_array_under_a_private_folder(open_base):
    mnt = open_base / "mnt"
    private = open_base / "private"
    private.mkdir()
    built = arrays.make_array(private, "sparse")
    os.chmod(built.path, 0o755)
    private.chmod(0o700)
    _mount_allow_other(built.path, mnt)
    assert os.stat(mnt).st_mode & 0o777 == 0o500
    assert os.stat(mnt / "array.yaml").st_mode & 0o777 == 0o400
    res = _as_nobody_cat(mnt / "array.yaml")
    if res is not None:  # refused by the adapter's mode checks, as the array itself is
        assert res.returncode != 0 and "Permission denied" in res.stderr
