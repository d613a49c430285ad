"""A mount answers `ls fragments/` and a first `footer.yaml` without importing numpy or PyYAML
(issue 17, item 5: numpy's import is most of a mount's start-up; see tdbfs/lazy.py and
tdbfs/views/simple_yaml.py). Counted in modules loaded, not in seconds."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import tiledb
import yaml

from mounting import daemon_pids, is_mounted, mounted, unmount

HEAVY = ("numpy", "yaml")

#: the daemon's own path, without FUSE: open the store as `tdbfs mount -f` does, build the tree,
#: list fragments/, render one footer.yaml
DAEMON_PATH = textwrap.dedent("""
    import json, sys
    from tdbfs.frontend.common import open_store
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root

    def read(root, path):
        node = resolve(root, path)
        return node.read(0, node.size())

    root = build_root(open_store(sys.argv[1], 64, None))
    names = sorted(resolve(root, "fragments").children())
    name = names[len(names) // 2]
    footer = read(root, f"fragments/{name}/footer.yaml")
    loaded = sorted(m for m in %r if m in sys.modules)
    print(json.dumps({"names": names, "name": name, "footer": footer.decode(), "loaded": loaded}))
""" % (HEAVY,))


def _dense(tmp_path, n: int):
    path = tmp_path / "arr"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype="int64"))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, sparse=False,
                                                      attrs=[tiledb.Attr("a", dtype="int32")]))
    for i in range(n):
        with tiledb.open(str(path), "w", timestamp=i + 1) as A:
            A[i * 10:i * 10 + 7] = {"a": list(range(i, i + 7))}
    return path


def _sparse_float(tmp_path):
    """Float and string dimensions: non-empty domains that are floats and names."""
    path = tmp_path / "sparse"
    dom = tiledb.Domain(tiledb.Dim("x", domain=(-1.0, 1e6), tile=10.0, dtype="float64"),
                        tiledb.Dim("s", dtype="ascii"))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, sparse=True,
                                                      attrs=[tiledb.Attr("a", dtype="int32")]))
    with tiledb.open(str(path), "w") as A:
        A[[0.5, 2.25, 999.75], ["abc", "b_1", "zz"]] = {"a": [1, 2, 3]}
    return path


def _reference(path, name):
    info = tiledb.FragmentInfoList(str(path))
    i = [os.path.basename(u.rstrip("/")) for u in info.uri].index(name)
    return info[i]


def test_listing_and_a_footer_load_neither_numpy_nor_pyyaml(tmp_path):
    for path in (_dense(tmp_path, 5), _sparse_float(tmp_path)):
        res = subprocess.run([sys.executable, "-c", DAEMON_PATH, str(path)], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["loaded"] == []
        assert out["names"] == sorted(os.listdir(path / "__fragments"))
        footer = yaml.safe_load(out["footer"])
        ref = _reference(path, out["name"])
        assert footer["version"] == ref.version
        assert footer["array_schema_name"] == ref.array_schema_name
        assert [tuple(r) for r in footer["non_empty_domain"]] == [tuple(r) for r in ref.nonempty_domain]


def test_the_footer_written_without_pyyaml_is_pyyamls(tmp_path):
    """The same footer.yaml bytes from the daemon's path and from PyYAML's dumper."""
    from tdbfs.store import ArrayStore
    from tdbfs.views.describe.fragment_metadata import describe_footer
    from tdbfs.views.render import _dumper, plain, to_yaml

    dump, dumper = _dumper()
    for path in (_dense(tmp_path, 2), _sparse_float(tmp_path)):
        res = subprocess.run([sys.executable, "-c", DAEMON_PATH, str(path)], capture_output=True, text=True,
                             timeout=120)
        out = json.loads(res.stdout)
        store = ArrayStore(str(path))
        data = plain(describe_footer(store.fragment(store.fragment_path_of(out["name"])).footer()))
        by_pyyaml = dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                         width=120)
        assert out["footer"] == by_pyyaml == to_yaml(data).decode()


def _maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def test_a_real_mount_serves_ls_and_footer_before_numpy_is_loaded(tmp_path):
    path = _dense(tmp_path, 4)
    names = sorted(os.listdir(path / "__fragments"))
    # the background check (check/background.py) loads numpy once the mount is quiet: off here, where
    # what serving a request loads is counted
    with mounted(path, extra_args=["-o", "check=off"]) as mnt:
        (pid,) = daemon_pids(mnt, spawned_only=True)
        listing = subprocess.run(["ls", str(mnt / "fragments")], capture_output=True, text=True, check=True)
        assert listing.stdout.split() == names
        footer = subprocess.run(["cat", str(mnt / "fragments" / names[2] / "footer.yaml")], capture_output=True,
                                text=True, check=True).stdout
        assert yaml.safe_load(footer)["non_empty_domain"] == [[20, 26]]
        maps = _maps(pid)
        assert "_multiarray_umath" not in maps and "/yaml/_yaml" not in maps
        # a tile needs numpy: the daemon loads it then, and this test sees it (tile 0 is cells 20-29)
        tile = subprocess.run(["cat", str(mnt / "fragments" / names[2] / "attrs" / "a0" / "tile_0.bin")],
                              capture_output=True, check=True).stdout
        assert tile[:7 * 4] == b"".join(v.to_bytes(4, "little") for v in range(2, 9))
        assert "_multiarray_umath" in _maps(pid)


#: every folder of one fragment listed, as `find` walks it: the names, and the modules loaded by then
DAEMON_WALK = textwrap.dedent("""
    import json, sys
    from tdbfs.frontend.common import open_store
    from tdbfs.views.nodes import DirNode, resolve
    from tdbfs.views.tree import build_root

    root = build_root(open_store(sys.argv[1], 64, None))
    name = sorted(resolve(root, "fragments").children())[0]
    paths, todo = [], [""]
    while todo:
        at = todo.pop()
        for child, node in resolve(root, f"fragments/{name}{at}").children().items():
            paths.append(f"{at}/{child}")
            if isinstance(node, DirNode):
                todo.append(f"{at}/{child}")
    print(json.dumps({"name": name, "paths": sorted(paths),
                      "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY + ("tdbfs.format.legacy0x", "tdbfs.store.legacy0x_fragment"),))


def test_a_walk_of_a_fragment_loads_neither_numpy_nor_0x_code(tmp_path):
    """`find MNT -name footer.yaml | head` on a fresh mount lists every folder of the first fragments:
    a dense fragment's tile files are counted from the tile offsets' count alone, without numpy, and
    fields/ is named without TileDB 0.x's codecs."""
    path = tmp_path / "arr"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype="int64"))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, sparse=False,
                                                      attrs=[tiledb.Attr("a", dtype="int32")]))
    with tiledb.open(str(path), "w") as A:
        A[5:27] = {"a": list(range(22))}
    res = subprocess.run([sys.executable, "-c", DAEMON_WALK, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["loaded"] == []
    lo, hi = _reference(path, out["name"]).nonempty_domain[0]
    ntiles = hi // 10 - lo // 10 + 1
    assert ntiles == 3
    tiles = sorted(p for p in out["paths"] if re.fullmatch(r"/attrs/a0/tile_\d+\.bin", p))
    assert tiles == [f"/attrs/a0/tile_{k}.bin" for k in range(ntiles)]
    assert "/fields/a" in out["paths"] and "/rtree" in out["paths"]
    # the same tree through a real mount, walked by find (no background check: it loads numpy)
    with mounted(path, extra_args=["-o", "check=off"]) as mnt:
        (pid,) = daemon_pids(mnt, spawned_only=True)
        top = mnt / "fragments" / out["name"]
        found = subprocess.run(["find", str(top)], capture_output=True, text=True, check=True).stdout.split()
        assert sorted(p[len(str(top)):] for p in found if p != str(top)) == out["paths"]
        assert "_multiarray_umath" not in _maps(pid)


PARENT = textwrap.dedent("""
    import json, sys
    from tdbfs.cli.main import main
    rc = main(["mount", sys.argv[1], sys.argv[2]])
    print(json.dumps({"rc": rc, "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY + ("tdbfs.store.array_store", "tdbfs.store.base_store", "tdbfs.format.generic_tile"),))


@contextlib.contextmanager
def _mounted_by(script: str, path, mnt, *extra, timeout: int = 120):
    """The result of `python -c script ARRAY MNT EXTRA...`, a program that mounts by calling tdbfs's `main`;
    the mount is undone afterwards, whatever the test found."""
    mnt.mkdir()
    try:
        yield subprocess.run([sys.executable, "-c", script, str(path), str(mnt), *map(str, extra)],
                             capture_output=True, text=True, timeout=timeout)
    finally:
        log = unmount(mnt)
        assert not is_mounted(mnt), log


def test_the_mount_command_itself_loads_neither_numpy_nor_the_store(tmp_path):
    """The parent process lists the fragment folders for its daemon (store/prelisted.py) with the
    storage alone: nothing that parses."""
    path, mnt = _dense(tmp_path, 2), tmp_path / "mnt"
    with _mounted_by(PARENT, path, mnt) as res:
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == {"rc": 0, "loaded": []}
        assert sorted(os.listdir(mnt / "fragments")) == sorted(os.listdir(path / "__fragments"))


#: `tdbfs mount` with a file of its own open, as a caller's descriptors would be, and its daemon's pid
FORKING_PARENT = textwrap.dedent("""
    import json, os, sys
    held = open(sys.argv[3], "rb")
    from tdbfs.cli.main import main
    rc = main(["mount", sys.argv[1], sys.argv[2]])
    print(json.dumps({"rc": rc, "pid": os.getpid(), "held_fd": held.fileno()}))
""")


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def test_a_background_daemon_is_a_fork_that_keeps_nothing_of_its_parent_but_its_argv(tmp_path):
    """With no secret in play the daemon is a fork of `tdbfs mount` (cli/daemon_start.py): the parent's argv,
    a session of its own in /, and none of the parent's descriptors (a file it held, the pipe of its output)."""
    path, mnt = _dense(tmp_path, 2), tmp_path / "mnt"
    held = tmp_path / "held.bin"
    held.write_bytes(b"x")
    with _mounted_by(FORKING_PARENT, path, mnt, held) as res:   # it returned: no daemon holds its pipes
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["rc"] == 0
        argv = [sys.executable, "-c", FORKING_PARENT, str(path), str(mnt), str(held)]
        (pid,) = [int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == argv]
        assert pid != out["pid"]
        assert os.getsid(pid) == pid and os.readlink(f"/proc/{pid}/cwd") == "/"
        assert sorted(os.listdir(mnt / "fragments")) == sorted(os.listdir(path / "__fragments"))
        fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert all(fds[fd] == "/dev/null" for fd in (0, 1, 2)), fds
        assert str(held) not in fds.values() and "/dev/fuse" in fds.values()
        assert not any(target.startswith("pipe:") for target in fds.values()), fds


#: `tdbfs mount` called by a program that runs a thread of its own
THREADED_PARENT = textwrap.dedent("""
    import sys, threading
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    from tdbfs.cli.main import main
    print(main(["mount", sys.argv[1], sys.argv[2]]))
""")


def test_a_caller_running_threads_gets_a_new_interpreter_as_its_daemon(tmp_path):
    """A fork would copy the locks of the caller's other threads, held by no thread of the child: the
    daemon is then started as a new interpreter, as where a secret is in play."""
    path, mnt = _dense(tmp_path, 2), tmp_path / "mnt"
    with _mounted_by(THREADED_PARENT, path, mnt) as res:
        assert res.returncode == 0 and res.stdout.split() == ["0"], res.stderr
        (pid,) = daemon_pids(mnt, spawned_only=True)
        argv = _cmdline(str(pid))
        assert argv[1:7] == ["-S", "-m", "tdbfs.cli", "mount", "-f", "--spawned"], argv
        assert sorted(os.listdir(mnt / "fragments")) == sorted(os.listdir(path / "__fragments"))


STUCK_LISTING = textwrap.dedent("""
    import sys, threading
    import tdbfs.mount.command as mount
    mount.list_fragments = lambda array, fd: threading.Event().wait()   # a folder that never lists
    from tdbfs.cli.main import main
    print(main(["mount", sys.argv[1], sys.argv[2]]))
""")


def test_a_listing_that_never_ends_does_not_hold_up_the_mount(tmp_path):
    """The fragment folders `tdbfs mount` lists for its daemon are waited for a second at most: on a
    folder that never lists the mount still returns, and its daemon lists the fragments itself."""
    path, mnt = _dense(tmp_path, 2), tmp_path / "mnt"
    with _mounted_by(STUCK_LISTING, path, mnt, timeout=60) as res:
        assert res.returncode == 0 and res.stdout.split() == ["0"], res.stderr
        assert sorted(os.listdir(mnt / "fragments")) == sorted(os.listdir(path / "__fragments"))


#: the `tdbfs` command as its console script runs it, with an atexit handler that says whether the
#: interpreter's teardown ran
ENTRY = textwrap.dedent("""
    import atexit, sys
    atexit.register(lambda: print("torn down", flush=True))
    from tdbfs.cli import run
    sys.argv = ["tdbfs"] + sys.argv[1:]
    run()
""")


def test_a_background_mount_ends_its_process_at_once_and_other_commands_as_usual(tmp_path):
    """A background `tdbfs mount` whose mount is live ends its process without the interpreter's teardown
    (cli/main.py `run`: ~8 ms of the mount's time to the prompt): status 0, no atexit handler run, the
    mount serving. A mount that fails, and every other command, exit the usual way."""
    path = _dense(tmp_path, 2)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        res = subprocess.run([sys.executable, "-c", ENTRY, "mount", str(path), str(mnt)], capture_output=True,
                             text=True, timeout=120)
        assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
        assert sorted(os.listdir(mnt / "fragments")) == sorted(os.listdir(path / "__fragments"))
        again = subprocess.run([sys.executable, "-c", ENTRY, "mount", str(path), str(mnt)], capture_output=True,
                               text=True, timeout=120)
        assert again.returncode != 0 and str(mnt) in again.stderr, again
        assert again.stdout == "torn down\n"
    finally:
        log = unmount(mnt)
        assert not is_mounted(mnt), log
    listed = subprocess.run([sys.executable, "-c", ENTRY, "ls", str(path), "fragments"], capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n") == [f"{n}/" for n in sorted(os.listdir(path / "__fragments"))] + ["torn down", ""]


# -- footer.yaml and other simple YAML without PyYAML (tdbfs/views/simple_yaml.py) -------------

def _pyyaml(data) -> str:
    from tdbfs.views.render import _dumper
    dump, dumper = _dumper()
    return dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)


def _yaml_files(node, path=""):
    from tdbfs.views.nodes import DirNode, FileNode
    for name, child in sorted(node.children().items()):
        if name == "as_of":
            continue
        sub = f"{path}/{name}" if path else name
        if isinstance(child, DirNode):
            yield from _yaml_files(child, sub)
        elif isinstance(child, FileNode) and name.endswith(".yaml"):
            try:
                yield sub, child.read(0, child.size())
            except Exception:   # a view of a damaged file: not YAML to compare
                continue


def test_every_yaml_view_of_the_sample_arrays_is_written_as_pyyaml_writes_it(sample_arrays):
    """Each YAML view, read back, is written by simple_yaml exactly as PyYAML writes it, or left
    to PyYAML; every footer.yaml is simple."""
    from tdbfs.store.open_array import open_array
    from tdbfs.views.simple_yaml import simple_yaml
    from tdbfs.views.tree import build_root

    simple = footers = 0
    for built in sample_arrays.values():
        for path, text in _yaml_files(build_root(open_array(str(built.path)))):
            data = yaml.safe_load(text)
            ours = simple_yaml(data)
            if path.endswith("/footer.yaml"):
                footers += 1
                assert ours == text.decode(), path
            if ours is not None:
                simple += 1
                assert ours == _pyyaml(data), path
    assert footers >= len(sample_arrays) and simple > footers


#: strings of every kind simple_yaml must either write plain or leave to PyYAML
WORDS = ["a", "__1_1_0123abcd_22", "x.y-z", "_", "Yes_", "yes", "Null", "on", "OFF", "~", "", "b c", "1abc", "0x1f",
         "é", "k" * 127, "k" * 128, "-x", "a:b", "a#b", ".inf", "2026-11-24", "[x]", "a\nb", "'q'", '"q"']
FLOATS = [0.5, -1.25, 3.0, 1 / 3, 1e-05, 1.5e20, 2.5e-300, float("nan"), float("inf"), -float("inf"), -0.0]
INTS = [0, 1, -5, 2 ** 64 - 1, -(2 ** 63), 10 ** 30, 123456789012345678]


def _random_data(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.35:
        return rng.choice([rng.choice(INTS), rng.randrange(-10 ** 18, 10 ** 18), rng.choice(WORDS),
                           rng.choice(FLOATS), rng.choice([True, False, None])])
    size = rng.choice([0, 1, 2, 5, 15, 16, 17, 40])
    if r < 0.55:        # a list of scalars: flow up to 16, wrapped past column 120
        return [rng.randrange(-10 ** rng.randrange(1, 20), 10 ** rng.randrange(1, 20)) if rng.random() < 0.8
                else _random_data(rng, 9) for _ in range(size)]
    if r < 0.7:
        return [_random_data(rng, depth + 1) for _ in range(size)]
    return {f"{rng.choice(WORDS[:5] + ['k' * 126])}{i}": _random_data(rng, depth + 1)
            for i in range(rng.choice([0, 1, 3, 7]))}


def test_simple_yaml_is_pyyaml_on_random_data():
    import random

    from tdbfs.views.render import plain
    from tdbfs.views.simple_yaml import simple_yaml

    rng = random.Random(17)
    written = wrapped = 0
    for _ in range(4000):
        data = plain(_random_data(rng))
        ours = simple_yaml(data)
        if ours is None:
            continue
        assert ours == _pyyaml(data), repr(data)
        written += 1
        wrapped += any(re.match(r" +-?[0-9]", line) for line in ours.splitlines())  # a flow list's next line
    assert written > 1000 and wrapped > 10   # most cases written here, flow lists wrapped among them
