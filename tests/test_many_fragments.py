"""Arrays of thousands of fragments: work counted, never timed (scripts/bench times it).

* listing fragments/ reads no file and, while __fragments/ is unchanged, lists nothing again and
  encodes no name again; readdir hands the names to libfuse's filler from the offset it asks for, and
  `ls` through libfuse 3 and 2 shows each fragment once, in order;
* a fragment is looked up once for all the requests below it, and its mtime read once it is committed;
* the first footer.yaml of a fragment costs the same storage calls among 2,000 fragments as among 20;
* array.yaml, stats.csv, timeline.csv and fragments.svg decode no tile, list each fragment folder at
  most twice in their render, show what TileDB sees, and cost no listing when looked at again;
  a fragment written meanwhile shows at the next look;
* `ls -l` of fragment folders (cells.csv sized exactly) keeps the
  fragments, fragment nodes, problem logs and cache under their bounds;
* as_of/ of N unconsolidated writes lists at most 10,000 + 2N symlinks, and any time typed resolves;
* through FUSE, `find MNT -name footer.yaml | head -1` prints a real footer having opened only a
  handful of the array's files (strace), and cells.csv reads whole.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import errno
import os
import re
import shutil
import stat
import subprocess
import time
import uuid

import numpy as np
import pytest
import tiledb
import yaml

import tdbfs.store.base_store as base_store_module
import tdbfs.views.tree as tree_module
from tdbfs.mount.fuse_ops import FuseOSError, TdbfsOperations
from tdbfs.mount.libfuse import mfusepy
from tdbfs.mount.fuse_setup import access_mask
from tdbfs.store import ArrayStore
from tdbfs.store.as_of import LINKS_LISTED
from tdbfs.store.storage.local import LocalStorage
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

from mounting import daemon_pids

CELLS = 256


def make_fragments(path, n: int) -> list[str]:
    """n fragments at timestamps 1..n: one written by tiledb-py, the others its folder hard-linked under
    new names, each with its commit file (as scripts/bench makes them). Returns the names, sorted."""
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 1023), tile=64, dtype=np.int64))
    attr = tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()]))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, sparse=False, attrs=[attr]))
    with tiledb.open(str(path), "w", timestamp=1) as A:
        A[0:CELLS] = {"a": np.arange(CELLS, dtype=np.int32)}
    for i in range(2, n + 1):
        add_fragment(path, i)
    age(path)
    return sorted(os.listdir(path / "__fragments"))


def add_fragment(path, t: int) -> str:
    frags = path / "__fragments"
    first = min(os.listdir(frags), key=lambda n: int(n.split("_")[2]))
    name = f"__{t}_{t}_{uuid.uuid4().hex}_{first.rsplit('_', 1)[1]}"
    (frags / name).mkdir()
    for f in os.listdir(frags / first):
        os.link(frags / first / f, frags / name / f)
    (path / "__commits" / f"{name}.wrt").touch()
    return name


def age(path) -> None:
    """Put the folders' mtimes a minute back: the store trusts a listing once its mtime is a second old."""
    t = time.time() - 60
    for d in [path] + [path / n for n in os.listdir(path) if (path / n).is_dir()]:
        os.utime(d, (t, t))


def _tracer_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("TracerPid:")).split()[1])


def _mounted_to_trace(tmp_path, mount, n: int):
    """(array, its fragment names, mount point, daemon pid, strace log path) of a fresh mount of n
    fragments; the test is skipped without strace."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    path = tmp_path / "arr"
    names = make_fragments(path, n)
    mnt = mount(path)
    [pid] = daemon_pids(mnt, spawned_only=True)
    return path, names, mnt, pid, tmp_path / "strace.log"


@contextlib.contextmanager
def _straced(pid: int, log, *options):
    """strace, with `options`, attached to the daemon `pid` and writing `log` while the block runs."""
    tracer = subprocess.Popen(["strace", "-f", "-qq", *options, "-o", str(log), "-p", str(pid)],
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):   # attached once the daemon has a tracer
            if _tracer_of(pid):
                break
            time.sleep(0.05)
        assert _tracer_of(pid)
        yield
    finally:
        tracer.terminate()
        tracer.wait(timeout=30)


class CountingStorage(LocalStorage):
    """The local storage, counting what it is asked: folders listed, entries stat'ed, files read."""

    def __init__(self, root: str):
        super().__init__(root)
        self.calls: collections.Counter = collections.Counter()
        self.listed: list[str] = []
        self.read_files: list[str] = []
        self.stated: list[str] = []

    def entries(self, rel: str = ""):
        self.calls["entries"] += 1
        self.listed.append(rel)
        return super().entries(rel)

    def _scan(self, rel: str, keep):
        self.calls["scan"] += 1
        self.listed.append(rel)
        return super()._scan(rel, keep)

    def stat(self, rel: str):
        self.calls["stat"] += 1
        self.stated.append(rel)
        return super().stat(rel)

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        self.calls["read"] += 1
        self.read_files.append(rel)
        return super().pread(rel, offset, size)

    def read(self, rel: str) -> bytes:
        self.calls["read"] += 1
        self.read_files.append(rel)
        return super().read(rel)

    def reset(self) -> None:
        self.calls.clear()
        self.listed.clear()
        self.read_files.clear()
        self.stated.clear()


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "arr"
    names = make_fragments(path, 2000)
    assert sorted(f.rsplit("/", 1)[-1] for f in tiledb.array_fragments(str(path)).uri) == names
    return path, names


def _time(name: str) -> int:
    return int(name.split("_")[2])


def _read(root, path: str) -> bytes:
    node = resolve(root, path)
    data = bytes(node.read(0, node.size()))
    assert len(data) == node.size()
    return data


def test_listing_fragments_reads_no_file_and_lists_once(many):
    path, names = many
    storage = CountingStorage(str(path))
    store = ArrayStore(storage)
    ops = TdbfsOperations(build_root(store))
    entries = ops.readdir("/fragments", 0)[2:]
    assert [e[0] for e in entries] == names and all(stat.S_ISDIR(e[1]) for e in entries)
    assert storage.read_files == [] and storage.calls["entries"] == 0
    assert sorted(storage.listed) == ["", "__fragments"]   # d_type listings: no stat per fragment
    assert store.loaded_fragments() == []
    storage.reset()
    assert [e[0] for e in ops.readdir("/fragments", 0)[2:]] == names
    assert storage.listed == [] and storage.read_files == [] and storage.calls["stat"] <= 2


def test_fragments_listing_is_prepared_once_per_listing(many):
    """A second listing of unchanged folders reuses the names the first one encoded for libfuse: no scan,
    no encoding, the very same list; a new fragment makes a new one, with it in its place."""
    path, names = many
    storage = CountingStorage(str(path))
    store = ArrayStore(storage)
    ops = TdbfsOperations(build_root(store))
    first = ops.dirents("/fragments", ops.opendir("/fragments"), 0)
    assert list(first[0]) == [n.encode() for n in names] and first[1] == stat.S_IFDIR | 0o555
    storage.reset()
    again = ops.dirents("/fragments", ops.opendir("/fragments"), 0)
    assert again[0] is first[0] and storage.listed == []
    added = add_fragment(path, 10**6)
    age(path)
    try:
        grown = ops.dirents("/fragments", ops.opendir("/fragments"), 0)
    finally:
        shutil.rmtree(path / "__fragments" / added)
        (path / "__commits" / f"{added}.wrt").unlink()
        age(path)
    assert list(grown[0]) == [n.encode() for n in sorted(names + [added])]


def _filler(accept: int, got: list):
    """libfuse's fuse_fill_dir_t as a C callback, keeping (name, file type, offset) of each entry it takes
    and saying "full" once it holds `accept` entries, as libfuse does when its reply buffer is full. It is
    called as the daemon calls libfuse's (untyped on a 64-bit ABI: the offset goes as a C int)."""
    from tdbfs.mount.fuse_readdir import _FILL_CALL_3, _FILLER_3
    taken = []

    def fill(buf, name, st_address, off, flags):
        if len(taken) == accept:
            return 1
        mode = ctypes.cast(st_address, ctypes.POINTER(mfusepy.c_stat)).contents.st_mode
        taken.append(off)
        got.append((name.decode(), stat.S_IFMT(mode), off))
        return 0

    return ctypes.cast(_FILLER_3(fill), _FILL_CALL_3), taken


def test_readdir_continues_from_the_offset_libfuse_asks_for(many):
    """Each readdir hands entries to the filler until it says its buffer is full, each with the offset of
    the next; the next readdir continues from that offset, on the listing taken at offset 0 (a fragment
    written meanwhile shows at the next listing), until the listing is served once, in order."""
    from tdbfs.mount.fuse_readdir import _fill_dir
    path, names = many
    ops = TdbfsOperations(build_root(ArrayStore(str(path))))
    fh = ops.opendir("/fragments")
    got, offset, calls = [], 0, 0
    while True:
        filler, taken = _filler(307, got)
        assert _fill_dir(ops, b"/fragments", filler, ctypes.c_void_p(0), offset, fh, 0) == 0
        calls += 1
        if not taken:
            break
        offset = taken[-1]
        if calls == 2:
            added = add_fragment(path, 10**6)
            age(path)
    try:
        assert calls == -(-(len(names) + 2) // 307) + 1
        assert [(n, t) for n, t, _ in got] == [(".", stat.S_IFDIR), ("..", stat.S_IFDIR)] + [
            (n, stat.S_IFDIR) for n in names]
        assert [off for _, _, off in got] == list(range(1, len(names) + 3))
        # rewinddir: offset 0 lists afresh
        got = []
        _fill_dir(ops, b"/fragments", _filler(10**6, got)[0], ctypes.c_void_p(0), 0, fh, 0)
        assert [n for n, _, _ in got[2:]] == sorted(names + [added])
        # a folder of files and folders: each entry its own type
        got = []
        _fill_dir(ops, b"/", _filler(10**6, got)[0], ctypes.c_void_p(0), 0, ops.opendir("/"), 0)
        kinds = {n: t for n, t, _ in got}
        assert kinds["array.yaml"] == stat.S_IFREG and kinds["fragments"] == stat.S_IFDIR
        assert [n for n, _, _ in got[2:]] == [e[0] for e in ops.readdir("/", 0)[2:]]
    finally:
        shutil.rmtree(path / "__fragments" / added)
        (path / "__commits" / f"{added}.wrt").unlink()
        age(path)
    ops.releasedir("/fragments", fh)
    assert fh not in ops._dir_handles


def test_a_readdirplus_of_a_small_folder_gives_its_subfolders_attributes(many):
    """With READDIRPLUS, a folder that fits in one reply hands each subfolder to libfuse with the
    attributes GETATTR gives (FUSE_FILL_DIR_PLUS) and its files by type alone; fragments/ of 2,000 names,
    which may span replies, hands none (libfuse would count lookups the kernel never saw)."""
    from tdbfs.mount.fuse_readdir import _FILL_CALL_3, _FILLER_3, _NO_FILL_FLAGS, _fill_dir
    path, names = many
    ops = TdbfsOperations(build_root(ArrayStore(str(path))))

    def listed(where):
        got = []

        def fill(buf, name, st_address, off, flags):
            st = ctypes.cast(st_address, ctypes.POINTER(mfusepy.c_stat)).contents
            got.append((name.decode(), flags, st.st_mode, st.st_nlink, st.st_size,
                        st.st_mtimespec.tv_sec * 10**9 + st.st_mtimespec.tv_nsec))
            return 0

        assert _fill_dir(ops, where.encode(), ctypes.cast(_FILLER_3(fill), _FILL_CALL_3), ctypes.c_void_p(0), 0,
                         ops.opendir(where), _NO_FILL_FLAGS, plus=True) == 0
        return got

    got = listed(f"/fragments/{names[3]}")
    assert [g[0] for g in got] == [".", ".."] + [e[0] for e in ops.readdir(f"/fragments/{names[3]}", 0)[2:]]
    plus = {g[0]: g[2:] for g in got if g[1] == 2}
    assert {"attrs", "rtree", "raw", "layout", "hex"} <= set(plus)
    for name, shown in plus.items():
        own = ops.getattr(f"/fragments/{names[3]}/{name}")
        assert stat.S_ISDIR(own["st_mode"])
        assert shown == (own["st_mode"], own["st_nlink"], own["st_size"], own["st_mtime"])
    assert all(stat.S_ISREG(g[2]) for g in got if g[1] == 0 and g[0] not in (".", ".."))
    assert {g[1] for g in listed("/fragments")} == {0}


@pytest.mark.parametrize("libfuse", [3, 2])
def test_ls_of_a_mount_lists_every_fragment_once_in_order(many, mount, libfuse):
    """Through libfuse 3 and 2, a listing of 2,000 fragments (several READDIR requests, each continuing at
    an offset) shows each name once, in the order of the folder, with its type and no lookup."""
    path, names = many
    mnt = mount(path, env={"TDBFS_LIBFUSE": str(libfuse)})
    listed = subprocess.run(["ls", "-U", "-a", str(mnt / "fragments")], capture_output=True, text=True,
                            check=True).stdout.split()
    assert listed == [".", ".."] + names
    with os.scandir(mnt / "fragments") as it:
        kinds = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in it]
    assert kinds == [(n, True, False) for n in names]
    top = subprocess.run(["find", str(mnt), "-maxdepth", "1", "-type", "f"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert sorted(os.path.basename(t) for t in top) == ["README.txt", "array.yaml", "fragments.svg", "stats.csv",
                                                        "timeline.csv"]


def test_the_daemon_lists_fragments_as_tdbfs_mount_listed_them(many, mount, tmp_path):
    """`tdbfs mount` lists __fragments/ while its daemon starts; the daemon's first `ls fragments/`
    serves that listing (its log says so), the same names in the same order as the folder's."""
    path, names = many
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["--log", str(log), "--debug"])
    listed = subprocess.run(["ls", "-U", str(mnt / "fragments")], capture_output=True, text=True,
                            check=True).stdout.split()
    assert listed == names
    assert f"__fragments/ as tdbfs mount listed it ({len(names)} names): taken" in log.read_text()


def test_a_fragment_written_after_tdbfs_mount_listed_shows(tmp_path, mount):
    """A fragment written between `tdbfs mount`'s listing and the first `ls fragments/`: the folder's
    mtime moved, so the daemon lists it again and shows it (and tiledb-py sees the same)."""
    path = tmp_path / "arr"
    names = make_fragments(path, 5)
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["--log", str(log), "--debug"])
    added = add_fragment(path, 6)
    listed = subprocess.run(["ls", str(mnt / "fragments")], capture_output=True, text=True, check=True).stdout.split()
    assert listed == sorted(names + [added])
    assert sorted(u.rsplit("/", 1)[-1] for u in tiledb.array_fragments(str(path)).uri) == listed
    assert "__fragments/ as tdbfs mount listed it (5 names): changed since, listed again" in log.read_text()


class CountingStore(ArrayStore):
    """The array store, counting the fragments it looks up one by one."""

    def __init__(self, storage):
        super().__init__(storage)
        self.looked_up = collections.Counter()

    def fragment_path_of(self, name):
        self.looked_up[name] += 1
        return super().fragment_path_of(name)


def test_a_fragment_is_looked_up_once_for_the_requests_below_it(many):
    """Every request below a fragment names it again: it is found by one stat, then reused as long as the
    kernel keeps the name (entry_timeout), not stat'ed at each of find's 80 requests per fragment; and
    its folder's mtime, which every folder under it shows, is asked once it is committed."""
    path, names = many
    storage = CountingStorage(str(path))
    store = CountingStore(storage)
    ops = TdbfsOperations(build_root(store))
    name = names[7]
    below = [f"/fragments/{name}", f"/fragments/{name}/footer.yaml", f"/fragments/{name}/attrs",
             f"/fragments/{name}/attrs/a0", f"/fragments/{name}/attrs/a0/tile_0.bin"]
    for _ in range(3):
        for where in below:
            assert ops.getattr(where)["st_mode"]
        ops.readdir(f"/fragments/{name}/attrs/a0", 0)
    # one stat to find it, one for its path when its node is made; 18 requests before
    assert store.looked_up == {name: 2}
    mtime = os.lstat(path / "__fragments" / name).st_mtime_ns   # shown through a float of seconds
    storage.reset()
    for under in ("", "/attrs", "/attrs/a0", "/rtree", "/raw"):
        assert abs(ops.getattr(f"/fragments/{name}{under}")["st_mtime"] - mtime) < 1000
    assert f"__fragments/{name}" not in storage.stated
    with pytest.raises(FuseOSError) as absent:
        ops.getattr("/fragments/__1_1_00000000000000000000000000000000_22")
    assert absent.value.errno == errno.ENOENT


def _first_footer_calls(path, name) -> tuple[collections.Counter, list, bytes]:
    storage = CountingStorage(str(path))
    ops = TdbfsOperations(build_root(ArrayStore(storage)))
    ops.readdir("/fragments", 0)
    storage.reset()
    where = f"/fragments/{name}/footer.yaml"
    ops.getattr(f"/fragments/{name}")
    fh = ops.open(where, os.O_RDONLY)
    data = ops.read(where, 1 << 20, 0, fh)
    return storage.calls, sorted(set(storage.read_files)), bytes(data)


def test_first_footer_costs_the_same_among_2000_as_among_20(many, tmp_path):
    path, names = many
    small = tmp_path / "small"
    small_names = make_fragments(small, 20)
    big_calls, big_files, footer = _first_footer_calls(path, names[1234])
    small_calls, _, _ = _first_footer_calls(small, small_names[7])
    assert big_calls == small_calls
    assert big_files[0] == f"__fragments/{names[1234]}/__fragment_metadata.tdb"
    assert all(f == big_files[0] or f.startswith("__schema/") for f in big_files)
    info = next(f for f in tiledb.array_fragments(str(path)) if f.uri.endswith(names[1234]))
    assert yaml.safe_load(footer)["non_empty_domain"] == [list(info.nonempty_domain[0])]


def test_summaries_decode_no_tile_and_are_kept_until_something_changes(many, tiles_decoded):
    path, names = many
    storage = CountingStorage(str(path))
    store = ArrayStore(storage)
    root = build_root(store)
    summary = yaml.safe_load(_read(root, "array.yaml"))
    listed = collections.Counter(storage.listed)
    assert max(n for rel, n in listed.items() if rel.startswith("__fragments/")) <= 2
    assert summary["counts"]["fragments"] == summary["counts"]["committed_fragments"] == len(names)
    assert summary["problems"] == []
    hint = {h["hint"]: h for h in summary["hints"]}["overlapping_fragments"]
    assert hint["pairs"] == len(names) * (len(names) - 1) // 2   # one domain, [0, 255], for all
    by_time = sorted(names, key=_time)
    assert hint["first_pairs"] == [[by_time[0], by_time[j]] for j in range(1, 11)]

    stats = _read(root, "stats.csv").decode().splitlines()
    rows = [r.split(",") for r in stats if r.startswith("field,")]
    info = tiledb.array_fragments(str(path))
    assert sorted((r[1], int(r[6])) for r in rows) == sorted(
        (uri.rsplit("/", 1)[-1], cells) for uri, cells in zip(info.uri, info.cell_num))
    timeline = _read(root, "timeline.csv").decode()
    assert timeline.count(",fragment_written,") == len(names)
    svg = _read(root, "fragments.svg").decode()
    assert len(re.findall(r'<rect class="fragment', svg)) == len(names)
    assert tiles_decoded == []

    storage.reset()   # nothing changed: a look costs the listing stamps, no listing and no read
    for name in ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg"):
        resolve(root, name).fresh()
        resolve(root, name).size()
    assert storage.listed == [] and storage.read_files == [] and storage.calls["entries"] == 0


def test_a_fragment_written_meanwhile_shows_at_the_next_look(tmp_path):
    path = tmp_path / "arr"
    names = make_fragments(path, 30)
    root = build_root(ArrayStore(str(path)))
    first = {n: _read(root, n) for n in ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg")}
    assert yaml.safe_load(first["array.yaml"])["counts"]["fragments"] == len(names)
    new = add_fragment(path, 1000)
    after = {n: _read(root, n) for n in first}
    assert yaml.safe_load(after["array.yaml"])["counts"]["fragments"] == len(names) + 1
    for n in ("stats.csv", "timeline.csv", "fragments.svg"):
        assert new.encode() in after[n] and new.encode() not in first[n]
    age(path)   # once the listing is trusted again, the same renderings are kept
    again = resolve(root, "array.yaml")
    assert again.fresh() == again.fresh() == _read(root, "array.yaml")


def test_a_walk_of_fragment_folders_stays_bounded(many, monkeypatch):
    path, names = many
    monkeypatch.setattr(base_store_module, "FRAGMENTS_KEPT", 32)
    monkeypatch.setattr(tree_module, "FRAGMENT_NODES_KEPT", 8)
    store = ArrayStore(str(path), cache_bytes=512 << 10)
    ops = TdbfsOperations(build_root(store))
    fragments = resolve(ops.root, "fragments")
    sizes = collections.Counter()
    for name in names[:600]:   # `ls -l fragments/<f>` of each
        for entry, mode, _ in ops.readdir(f"/fragments/{name}", 0)[2:]:
            st = ops.getattr(f"/fragments/{name}/{entry}")
            if stat.S_ISREG(mode):
                sizes[entry, st["st_size"]] += 1
        assert len(store.loaded_fragments()) <= 32 and len(fragments._nodes) <= 8
        assert store.cache.size_bytes <= 512 << 10
    assert sizes["footer.yaml", len(_read(ops.root, f"fragments/{names[0]}/footer.yaml"))] == 600
    assert store._problem_logs == {} and len(store._parsed) <= 4   # nothing kept per fragment
    # each fragment.yaml found its commit file by lstat: no map of all 2,000 fragments' commits is made
    assert "committed" not in store._per_listing
    shown = yaml.safe_load(_read(ops.root, f"fragments/{names[9]}/fragment.yaml"))
    assert (shown["committed"], shown["commit_file"]) == (True, f"__commits/{names[9]}.wrt")
    # cells.csv, sized exactly at stat (its tiles rendered), reads TileDB's cells of the fragment
    where = f"/fragments/{names[5]}/cells.csv"
    fh = ops.open(where, os.O_RDONLY)
    text = bytes(ops.read(where, 1 << 20, 0, fh))
    with tiledb.open(str(path), timestamp=(_time(names[5]), _time(names[5]))) as A:
        values = A[0:CELLS]["a"]
    assert text.decode().splitlines()[1:] == [f"{i},{v}" for i, v in enumerate(values)]
    assert ops.getattr(where)["st_size"] == len(text)


def test_as_of_lists_a_linear_number_of_symlinks(many):
    path, names = many
    ops = TdbfsOperations(build_root(ArrayStore(str(path))))
    times = [e[0] for e in ops.readdir("/as_of", 0)[2:]]
    links = {t: len(ops.readdir(f"/as_of/{t}/fragments", 0)) - 2 for t in times}
    assert sum(links.values()) <= LINKS_LISTED + 2 * len(names)
    # the newest times are listed: the schema's (after every write) and the last writes
    assert links[times[-1]] == len(names) and str(len(names)) in times and len(times) >= 3
    assert "5" not in times
    typed = [e[0] for e in ops.readdir("/as_of/5/fragments", 0)[2:]]   # any time typed resolves
    assert sorted(typed) == sorted(n for n in names if _time(n) <= 5)
    reader = yaml.safe_load(_read(ops.root, "as_of/5/reader.yaml"))
    assert sorted(reader["fragments_read"]) == sorted(typed)


_FUSE_OPCODES = {1: "LOOKUP", 3: "GETATTR", 27: "OPENDIR", 28: "READDIR", 44: "READDIRPLUS"}


def _fuse_requests(strace_log: str) -> collections.Counter:
    """The requests the daemon read from /dev/fuse, by opcode (struct fuse_in_header: u32 len, u32 opcode),
    from `strace -e trace=read -xx -s 16`."""
    seen = collections.Counter()
    # a read by one of the loop's threads while others wait is logged in two parts: `read(N, <unfinished
    # ...>` then `<... read resumed>"\x.."`
    for m in re.finditer(r'(?:read\(\d+, |<\.\.\. read resumed>)"((?:\\x[0-9a-f]{2}){8})', strace_log):
        head = bytes.fromhex(m.group(1).replace("\\x", ""))
        seen[_FUSE_OPCODES.get(int.from_bytes(head[4:8], "little"), "other")] += 1
    return seen


def test_find_walks_into_a_fragments_folders_without_a_lookup_each(tmp_path, mount):
    """A READDIRPLUS of a small folder gives the kernel its subfolders' attributes, the very ones GETATTR
    gives: `find` walks a fragment's 10 folders with no LOOKUP for each (strace of the daemon's requests)."""
    path, names, mnt, pid, log = _mounted_to_trace(tmp_path, mount, 3)
    assert sorted(os.listdir(mnt / "fragments")) == names
    with _straced(pid, log, "-e", "trace=read", "-xx", "-s", "16"):
        walked = subprocess.run(["find", str(mnt / "fragments" / names[1])], capture_output=True, text=True,
                                check=True, timeout=60).stdout.splitlines()
    requests = _fuse_requests(log.read_text())
    ops = TdbfsOperations(build_root(ArrayStore(str(path))), perm_mask=access_mask(str(path)))
    inside = [w[len(str(mnt)):] for w in walked]
    folders = [p for p in inside if stat.S_ISDIR(ops.getattr(p)["st_mode"])]
    assert len(folders) >= 10 and len(inside) > 50
    assert requests["READDIRPLUS"] == len(folders)
    assert requests["LOOKUP"] <= 1, requests   # was one per folder and the fragment's own
    for where in folders:   # what the kernel holds from the listing is what GETATTR gives
        shown, own = os.stat(str(mnt) + where), ops.getattr(where)
        assert (shown.st_mode, shown.st_nlink, shown.st_size, shown.st_mtime_ns) == \
            (own["st_mode"], own["st_nlink"], own["st_size"], own["st_mtime"]), where


def test_find_prints_a_footer_at_once_having_opened_a_handful_of_files(tmp_path, mount):
    path, names, mnt, pid, log = _mounted_to_trace(tmp_path, mount, 5000)
    with _straced(pid, log, "-e", "trace=openat"):
        # the first footer found, and find stops there: what `find | head -1` waits for
        find = subprocess.run(["find", str(mnt), "-name", "footer.yaml", "-print", "-quit"], capture_output=True,
                              text=True, timeout=120)
    first = find.stdout.strip()
    assert re.fullmatch(re.escape(str(mnt)) + r"/fragments/__\d+_\d+_[0-9a-f]{32}_\d+/footer\.yaml", first)
    name = first.split("/")[-2]
    assert name in names
    footer = yaml.safe_load(subprocess.run(["cat", first], capture_output=True, text=True, check=True).stdout)
    assert footer["non_empty_domain"] == [[0, CELLS - 1]]
    # the store opens the array's files relative to a folder it holds open: a relative path; Python's
    # imports open absolute ones
    opened = [line for line in log.read_text().splitlines()
              if re.search(r'openat\(\d+, "[^/]', line) and "O_DIRECTORY" not in line]
    assert len(opened) <= 8, opened
    # cells.csv: its exact size in stat, before and after cat reads it whole
    cells = mnt / "fragments" / name / "cells.csv"
    size = os.stat(cells).st_size
    text = subprocess.run(["cat", str(cells)], capture_output=True, text=True, check=True).stdout
    assert text.splitlines()[0] == "d,a" and len(text.splitlines()) == CELLS + 1
    assert size == os.stat(cells).st_size == len(text.encode())
