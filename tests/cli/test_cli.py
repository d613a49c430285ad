"""The `tdbfs` command: ls/cat/tree without FUSE, mount/umount with it, and one-line errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from tdbfs import __version__, cli
from tdbfs.frontend import common
from tdbfs.mount import daemon, daemon_start
from tdbfs.mount import command as mount
from tdbfs.views.nodes import BytesFile, StaticDir, SymlinkNode, ViewError

from mounting import daemon_pids

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT_DIR)


def tdbfs(*args, cwd=None, env=None, timeout=60):
    """Run the real command in a subprocess (as a user would)."""
    return subprocess.run([sys.executable, "-m", "tdbfs", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT_DIR, env=env or ENV, timeout=timeout)


def one_error_line(res, *fragments):
    """stderr is exactly one `tdbfs: error: ...` line containing every fragment."""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("tdbfs: error: "), res.stderr
    for f in fragments:
        assert f in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def mounted(path) -> bool:
    real = os.path.realpath(str(path))
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == real for line in f)


def force_unmount(mnt) -> None:
    for cmd in (["fusermount3", "-u"], ["fusermount", "-u"], ["fusermount3", "-u", "-z"], ["umount", "-l"]):
        if not mounted(mnt):
            break
        subprocess.run(cmd + [str(mnt)], capture_output=True)
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while daemon_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in daemon_pids(mnt):  # only daemons started for this test's mount point
        os.kill(pid, 9)


# --------------------------------------------------------------------------- arrays

@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """A dense array (2 fragments, zstd) and a sparse one with a string attribute."""
    import tiledb

    base = tmp_path_factory.mktemp("arrays")
    dense = str(base / "dense")
    dom = tiledb.Domain(tiledb.Dim(name="d", domain=(0, 999), tile=100, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, attrs=[
        tiledb.Attr(name="a", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()]))])
    tiledb.Array.create(dense, schema)
    with tiledb.open(dense, "w") as A:
        A[:] = np.arange(1000, dtype=np.int32)
    with tiledb.open(dense, "w") as A:
        A[0:100] = np.arange(100, dtype=np.int32) * 2

    sparse = str(base / "sparse")
    dom = tiledb.Domain(tiledb.Dim(name="x", domain=(0, 99), tile=10, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=4, attrs=[
        tiledb.Attr(name="s", dtype=str, var=True), tiledb.Attr(name="v", dtype=np.float64)])
    tiledb.Array.create(sparse, schema)
    with tiledb.open(sparse, "w") as A:
        A[np.array([1, 5, 7, 42, 90], dtype=np.int64)] = {
            "s": np.array(["one", "five", "seven", "forty-two", "ninety"], dtype=object),
            "v": np.array([1.5, 5.5, 7.5, 42.5, 90.5])}

    notarray = base / "not_an_array"
    notarray.mkdir()
    (notarray / "file.txt").write_text("hello\n")
    return {"dense": dense, "sparse": sparse, "notarray": str(notarray), "base": base}


def fragments_of(array):
    return sorted(os.listdir(os.path.join(array, "__fragments")))


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    try:
        yield path
    finally:
        force_unmount(path)
    assert not mounted(path)


# --------------------------------------------------------------------------- the command line

def test_version():
    res = tdbfs("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"tdbfs {__version__}"


def test_help_has_examples_and_exit_codes():
    res = tdbfs("--help")
    assert res.returncode == 0
    for text in ("tdbfs mount /data/my_array /mnt/arr", "tdbfs umount", "tdbfs ls", "tdbfs cat", "tdbfs tree",
                 "exit status:", "0  success", "1  runtime error", "2  usage error"):
        assert text in res.stdout
    res = tdbfs("mount", "--help")
    assert res.returncode == 0 and "--cache-mb N" in res.stdout and "-f, --foreground" in res.stdout
    assert "large_read" in res.stdout and "examples:" in res.stdout


@pytest.mark.parametrize("args,fragment", [
    ((), "required: COMMAND"),
    (("mount",), "required: ARRAY, MNT"),
    (("mount", "a"), "required: MNT"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
    (("ls", "a", "--cache-mb", "0"), "must be at least 1"),
    (("tree", "a", "--depth", "x"), "not a whole number"),
])
def test_usage_errors_are_one_line_exit_2(args, fragment):
    res = tdbfs(*args)
    assert res.returncode == 2
    one_error_line(res, fragment, "--help")


def test_main_returns_codes_in_process(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tdbfs {__version__}"
    assert cli.main(["cat"]) == 2
    assert capsys.readouterr().err.startswith("tdbfs: error: the following arguments are required")


# --------------------------------------------------------------------------- ls / cat / tree on a toy tree

def toy_root():
    def broken():
        raise ViewError("tile 2 of a0.tdb: checksum mismatch at byte 812")

    deep = StaticDir(lambda: {"leaf.txt": BytesFile(lambda: b"leaf\n")})
    sub = StaticDir(lambda: {"deep": deep, "b.bin": BytesFile(lambda: bytes(range(256)))})
    return StaticDir(lambda: {
        "README.txt": BytesFile(lambda: b"read me\n"),
        "sub": sub,
        "current.yaml": SymlinkNode("sub/b.bin"),
        "broken.yaml": BytesFile(broken),
        "empty": StaticDir(lambda: {}),
    })


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(common, "open_root", lambda array, cache_mb=512: toy_root())


def test_ls_toy(toy, capsys):
    assert cli.main(["ls", "ARR"]) == 0
    assert capsys.readouterr().out.splitlines() == ["README.txt", "sub/", "current.yaml", "broken.yaml", "empty/"]
    assert cli.main(["ls", "ARR", "sub"]) == 0
    assert capsys.readouterr().out.splitlines() == ["deep/", "b.bin"]
    assert cli.main(["ls", "ARR", "/sub/b.bin"]) == 0
    assert capsys.readouterr().out.splitlines() == ["b.bin"]
    assert cli.main(["ls", "ARR", "empty"]) == 0
    assert capsys.readouterr().out == ""


def test_ls_long_toy(toy, capsys):
    assert cli.main(["ls", "-l", "ARR"]) == 1  # one view is unreadable: listed, and reported
    out, err = capsys.readouterr()
    rows = {line.split()[3]: line.split() for line in out.splitlines()}
    assert rows["README.txt"][:2] == ["-r--r--r--", "8"]
    assert rows["sub/"][:2] == ["dr-xr-xr-x", "-"]
    assert rows["current.yaml"][0] == "lrwxrwxrwx" and out.count("current.yaml -> sub/b.bin") == 1
    assert rows["broken.yaml"][:2] == ["-r--r--r--", "?"]
    assert err.splitlines() == ["tdbfs: error: broken.yaml: cannot be read: "
                                "tile 2 of a0.tdb: checksum mismatch at byte 812"]


def test_cat_toy_binary_and_symlink(toy, capfdbinary):
    assert cli.main(["cat", "ARR", "sub/b.bin"]) == 0
    assert capfdbinary.readouterr().out == bytes(range(256))
    assert cli.main(["cat", "ARR", "current.yaml"]) == 0  # follows the symlink
    assert capfdbinary.readouterr().out == bytes(range(256))
    assert cli.main(["cat", "ARR", "sub/deep/../deep/leaf.txt"]) == 0
    assert capfdbinary.readouterr().out == b"leaf\n"


@pytest.mark.parametrize("args,code,message", [
    (["cat", "ARR", "broken.yaml"], 1,
     "tdbfs: error: broken.yaml: cannot be read: tile 2 of a0.tdb: checksum mismatch at byte 812"),
    (["cat", "ARR", "nope.yaml"], 1, "tdbfs: error: no such path in the view: nope.yaml"),
    (["cat", "ARR", "sub"], 1, "tdbfs: error: is a folder, not a file: sub (use 'tdbfs ls')"),
    (["ls", "ARR", "sub/nope"], 1, "tdbfs: error: no such path in the view: sub/nope"),
    (["ls", "ARR", "README.txt/x"], 1, "tdbfs: error: not a folder in the view: README.txt"),
    (["tree", "ARR", "nope"], 1, "tdbfs: error: no such path in the view: nope"),
])
def test_toy_errors_one_line(toy, capsys, args, code, message):
    assert cli.main(args) == code
    out, err = capsys.readouterr()
    assert err.splitlines() == [message]
    assert out == ""


def test_tree_toy(toy, capsys):
    assert cli.main(["tree", "ARR"]) == 0
    assert capsys.readouterr().out == (
        "/\n"
        "├── README.txt\n"
        "├── sub/\n"
        "│   ├── deep/\n"
        "│   │   └── leaf.txt\n"
        "│   └── b.bin\n"
        "├── current.yaml -> sub/b.bin\n"
        "├── broken.yaml\n"
        "└── empty/\n"
        "\n3 directories, 5 files\n")
    assert cli.main(["tree", "--depth", "1", "ARR", "sub"]) == 0
    assert capsys.readouterr().out == "sub/\n├── deep/\n└── b.bin\n\n1 directories, 1 files\n"


def test_daemon_failure_message():
    err = (b"2024-01-01 00:00:00,000 INFO tdbfs: serving\n"
           b"fuse: unknown option(s): `-o bogus'\n"
           b"tdbfs: error: libfuse could not mount /m\n")
    assert daemon.daemon_failure(err, 1) == "libfuse could not mount /m: fuse: unknown option(s): `-o bogus'"
    assert daemon.daemon_failure(b"tdbfs: error: array not found: /x\n", 1) == "array not found: /x"
    assert daemon.daemon_failure(b"", 3) == "mount failed: the daemon exited with status 3"


# --------------------------------------------------------------------------- ls / cat / tree on real arrays

def test_ls_real_array(arrays):
    res = tdbfs("ls", arrays["dense"])
    assert res.returncode == 0, res.stderr
    names = res.stdout.splitlines()
    for name in ("README.txt", "array.yaml", "schema/", "metadata/", "commits/", "fragment_meta/", "fragments/"):
        assert name in names
    res = tdbfs("ls", arrays["dense"], "fragments")
    assert res.stdout.splitlines() == [f + "/" for f in fragments_of(arrays["dense"])]
    frag = fragments_of(arrays["dense"])[0]
    res = tdbfs("ls", "-l", arrays["dense"], f"fragments/{frag}")
    assert res.returncode == 0, res.stderr
    rows = {line.split()[-1]: line.split() for line in res.stdout.splitlines()}
    assert rows["fragment.yaml"][0] == "-r--r--r--" and int(rows["fragment.yaml"][1]) > 0
    assert rows["attrs/"][0] == "dr-xr-xr-x"


def test_cat_real_array(arrays):
    dense = arrays["dense"]
    res = tdbfs("cat", dense, "array.yaml")
    assert res.returncode == 0, res.stderr
    assert "dense" in res.stdout and "fragments: 2" in res.stdout
    # the schema through the current.yaml symlink
    res = tdbfs("cat", dense, "schema/current.yaml")
    assert res.returncode == 0, res.stderr
    assert "ZSTD" in res.stdout.upper() and "int32" in res.stdout.lower()
    # a decoded tile, byte for byte: the first fragment holds 0..999, tile 3 is 300..399
    first = fragments_of(dense)[0]
    out = subprocess.run([sys.executable, "-m", "tdbfs", "cat", dense, f"fragments/{first}/attrs/a0/tile_3.bin"],
                         capture_output=True, cwd=ROOT_DIR, env=ENV).stdout
    assert out == np.arange(300, 400, dtype=np.int32).tobytes()
    # raw files are byte for byte the fragment's files
    raw = os.path.join(dense, "__fragments", first, "a0.tdb")
    out = subprocess.run([sys.executable, "-m", "tdbfs", "cat", dense, f"fragments/{first}/raw/a0.tdb"],
                         capture_output=True, cwd=ROOT_DIR, env=ENV).stdout
    assert out == open(raw, "rb").read()


def test_cat_real_sparse_strings(arrays):
    sparse = arrays["sparse"]
    frag = fragments_of(sparse)[0]
    res = tdbfs("cat", sparse, f"fragments/{frag}/attrs/a0/tile_0.txt")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ['"one"', '"five"', '"seven"', '"forty-two"']


def test_tree_real_array(arrays):
    res = tdbfs("tree", "--depth", "2", arrays["dense"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "/"
    assert "├── array.yaml" in lines and "├── fragments/" in lines
    for frag in fragments_of(arrays["dense"]):
        assert any(line.endswith(f"── {frag}/") for line in lines)
    assert not any("fragment.yaml" in line for line in lines)  # depth 2 stops above it
    assert lines[-1].endswith("files") and "directories" in lines[-1]
    res = tdbfs("tree", arrays["dense"], "schema")
    assert any(" -> " in line and "current.yaml" in line for line in res.stdout.splitlines())


def test_view_commands_errors(arrays, tmp_path):
    res = tdbfs("ls", tmp_path / "missing")
    assert res.returncode == 1
    one_error_line(res, "array not found", "missing")
    res = tdbfs("cat", arrays["notarray"], "array.yaml")
    assert res.returncode == 1
    one_error_line(res, "not a TileDB array", "not_an_array")
    res = tdbfs("cat", arrays["dense"], "fragments/nope/fragment.yaml")
    assert res.returncode == 1
    one_error_line(res, "no such path in the view: fragments/nope/fragment.yaml")


# --------------------------------------------------------------------------- mount / umount

def test_mount_ls_cat_umount(arrays, mnt, tmp_path):
    dense = arrays["dense"]
    log = tmp_path / "daemon.log"
    t0 = time.monotonic()
    res = tdbfs("mount", "--log", log, dense, mnt)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "" and res.stderr == ""
    assert time.monotonic() - t0 < 10
    # ready when the command returns
    assert mounted(mnt)
    names = os.listdir(mnt)
    assert {"README.txt", "array.yaml", "schema", "fragments", "commits"} <= set(names)
    assert sorted(os.listdir(mnt / "fragments")) == fragments_of(dense)
    with open("/proc/self/mountinfo") as f:
        line = next(ln for ln in f if ln.split()[4] == os.path.realpath(mnt))
    # the source `mount` and `df` show is the array
    assert f" - fuse.tdbfs {dense} " in line and "ro" in line.split()[5].split(",")
    # the same bytes as the command-line view, but for how far each has checked the array (`checked:`: the
    # mount's background check, none for the command line)
    def unchecked(text: str) -> str:
        return re.sub(r"\nchecked:\n(  .*\n)+", "\n", text)
    via_cli = tdbfs("cat", dense, "array.yaml").stdout
    mounted_yaml = (mnt / "array.yaml").read_text()
    assert "\nchecked:\n  array_files: " in mounted_yaml and "  background: not running\n" in via_cli
    assert unchecked(mounted_yaml) == unchecked(via_cli)
    first = fragments_of(dense)[0]
    tile = mnt / "fragments" / first / "attrs" / "a0" / "tile_3.bin"
    assert os.stat(tile).st_size == 400
    assert tile.read_bytes() == np.arange(300, 400, dtype=np.int32).tobytes()
    assert os.readlink(mnt / "schema" / "current.yaml").endswith(".yaml")
    res = subprocess.run(["touch", str(mnt / "array.yaml")], capture_output=True, text=True)
    assert "Read-only file system" in res.stderr
    # the daemon runs detached, in /, with the malloc tuning in effect (its log says what it set)
    pids = daemon_pids(mnt)
    assert len(pids) == 1
    assert os.getsid(pids[0]) != os.getsid(0) and os.readlink(f"/proc/{pids[0]}/cwd") == "/"
    assert "MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824" in log.read_text()
    # a fragment written while mounted appears
    import tiledb
    with tiledb.open(dense, "w") as A:
        A[500:600] = np.zeros(100, dtype=np.int32)
    assert len(os.listdir(mnt / "fragments")) == 3
    res = tdbfs("umount", mnt)
    assert res.returncode == 0, res.stderr
    assert not mounted(mnt)
    deadline = time.monotonic() + 10
    while daemon_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon_pids(mnt) == []
    assert "serving" in log.read_text()
    assert os.listdir(mnt) == []


def test_mount_foreground(arrays, mnt):
    proc = subprocess.Popen([sys.executable, "-m", "tdbfs", "mount", "-f", arrays["sparse"], str(mnt)],
                            cwd=ROOT_DIR, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not mounted(mnt) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert mounted(mnt)
        assert "array.yaml" in os.listdir(mnt)
        assert "sparse" in (mnt / "array.yaml").read_text()
    finally:
        force_unmount(mnt)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert b"serving" in err  # -f without --log: the log goes to stderr


def test_mount_errors(arrays, mnt, tmp_path):
    dense = arrays["dense"]
    res = tdbfs("mount", tmp_path / "missing", mnt)
    assert res.returncode == 1
    one_error_line(res, "array not found", "missing")
    res = tdbfs("mount", arrays["notarray"], mnt)
    assert res.returncode == 1
    one_error_line(res, "not a TileDB array", "not_an_array")
    res = tdbfs("mount", dense, tmp_path / "nomnt")
    assert res.returncode == 1
    one_error_line(res, "mount point not found", "nomnt")
    (tmp_path / "afile").write_text("x")
    res = tdbfs("mount", dense, tmp_path / "afile")
    assert res.returncode == 1
    one_error_line(res, "mount point is not a folder")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    res = tdbfs("mount", dense, full)
    assert res.returncode == 1
    one_error_line(res, f"mount point {full} is not empty")
    res = tdbfs("mount", "-o", "rw", dense, mnt)
    assert res.returncode == 2
    one_error_line(res, "'rw' is not supported")
    res = tdbfs("mount", "-o", "large_read", dense, mnt)
    assert res.returncode == 2
    one_error_line(res, "'large_read' is not supported")
    # libfuse refuses an option: its reason is reported by the parent
    res = tdbfs("mount", "-o", "no_such_option_xyz", dense, mnt)
    assert res.returncode == 1
    one_error_line(res, "no_such_option_xyz")
    assert not mounted(mnt) and daemon_pids(mnt) == []
    # no FUSE library
    env = dict(ENV, FUSE_LIBRARY_PATH="/nonexistent/libfuse3.so.3")
    res = tdbfs("mount", dense, mnt, env=env)
    assert res.returncode == 1
    one_error_line(res, "FUSE is not available", "apt-get install fuse3")
    assert not mounted(mnt)


def test_mount_busy_and_umount_errors(arrays, mnt, tmp_path):
    res = tdbfs("umount", mnt)
    assert res.returncode == 1
    one_error_line(res, f"{mnt} is not mounted")
    res = tdbfs("umount", tmp_path / "nowhere")
    assert res.returncode == 1
    one_error_line(res, "mount point not found")
    res = tdbfs("umount", "/")
    assert res.returncode == 1
    one_error_line(res, "/ is not a tdbfs mount")

    assert tdbfs("mount", arrays["dense"], mnt).returncode == 0
    res = tdbfs("mount", arrays["sparse"], mnt)
    assert res.returncode == 1
    one_error_line(res, f"mount point {mnt} is busy")
    # in use: umount says so, the mount stays
    holder = subprocess.Popen(["sleep", "30"], cwd=str(mnt / "fragments"))
    try:
        res = tdbfs("umount", mnt)
        assert res.returncode == 1
        one_error_line(res, "cannot unmount", "busy")
        assert mounted(mnt)
        assert "array.yaml" in os.listdir(mnt)
    finally:
        holder.kill()
        holder.wait()
    assert tdbfs("umount", mnt).returncode == 0
    assert not mounted(mnt)


def test_stale_mount_is_reported(arrays, mnt):
    assert tdbfs("mount", arrays["dense"], mnt).returncode == 0
    pids = daemon_pids(mnt)
    assert len(pids) == 1
    os.kill(pids[0], 9)  # the daemon dies without unmounting
    deadline = time.monotonic() + 10
    while daemon_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    res = tdbfs("mount", arrays["dense"], mnt)
    assert res.returncode == 1
    one_error_line(res, "stale FUSE mount", "tdbfs umount")
    res = tdbfs("umount", mnt)
    assert res.returncode == 0, res.stderr
    assert not mounted(mnt)
    # and the mount point is usable again
    assert tdbfs("mount", arrays["dense"], mnt).returncode == 0
    assert "array.yaml" in os.listdir(mnt)
    assert tdbfs("umount", mnt).returncode == 0


def test_daemon_environment_has_no_key(monkeypatch):
    monkeypatch.setenv("TDBFS_ENCRYPTION_KEY", "k" * 32)
    monkeypatch.setenv("TDBFS_KEY_FILE", "/somewhere/key")
    monkeypatch.setenv("TDBFS_TEST_KEPT", "yes")
    env = daemon_start.daemon_env()
    assert "TDBFS_ENCRYPTION_KEY" not in env and "TDBFS_KEY_FILE" not in env
    assert env["TDBFS_TEST_KEPT"] == "yes"  # the rest is kept


def test_key_fd_is_hidden_and_read_once(tmp_path):
    res = tdbfs("mount", "--help")
    assert res.returncode == 0 and "--key-fd" not in res.stdout
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"0123456789abcdef0123456789abcdef")
    os.close(write_fd)
    key = daemon.read_key_fd(read_fd)
    assert "0123" not in repr(key)
    with pytest.raises(OSError):
        os.fstat(read_fd)  # closed once read
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"short")
    os.close(write_fd)
    with pytest.raises(common.CliError) as info:
        daemon.read_key_fd(read_fd)
    assert "short" not in str(info.value)


def test_option_keys():
    assert mount.option_keys(["allow_other,fsname=x", "attr_timeout=1"]) == {"allow_other", "fsname", "attr_timeout"}
    assert "fsname" not in mount.option_keys([])
