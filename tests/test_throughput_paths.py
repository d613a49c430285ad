"""The paths decoded throughput relies on (behaviour, not timing: scripts/bench and scripts/profile_read
measure the speed).

* a sparse tile of a few hundred KB has the next one decoded ahead, each tile decoded once, and what is
  decoded ahead stays inside the cache's bounds;
* through a real mount every tile file of a sparse array (attribute and coordinates) reads as TileDB
  reads it; stat shows 1 MiB blocks, so `cat` asks for a whole small tile at once, and libfuse3 no longer
  asks for the attributes before every read: a 400 KB tile is one READ request (with the read-ahead
  the daemon raises as root);
* `-o threads` serves eight concurrent readers the same bytes;
* a damaged chunk met while decoding ahead is reported by the real read, with file and offset;
* the glibc malloc tuning reaches the daemon; `read_ahead_kb` is parsed by tdbfs, never passed to libfuse;
* a tile of ZSTD alone decodes into one buffer (chunks taken by another thread when it is big, as the
  daemon does) to the bytes and chunk records of the filter-by-filter path, and a damaged frame there is
  reported in the same words, file and offset;
* the chunks of one tile are taken by every thread offered them, side by side, and a damaged one stops
  them all; a reader asking for a tile being decoded ahead takes chunks of it instead of waiting;
* decoded tiles served to their end leave the cache beyond the newest few (the page cache holds them),
  and one asked for again is decoded again; not on a `-o direct_io` mount, where the kernel keeps nothing;
* a stat of a tile file starts importing numpy in the daemon, before the read that needs it; an open's
  fstat agrees with stat and with the bytes read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tiledb
import yaml

import tdbfs.store.cache as cache_module
import tdbfs.store.fragment as fragment_module

from mounting import daemon_pids
from tdbfs.frontend.common import BLAS_ENV
from tdbfs.mount.daemon import MALLOC_TUNING
from tdbfs.mount.fuse_ops import REPLY_SENT_S
from tdbfs.mount.fuse_setup import LOCAL_MIN_THREADS
from tdbfs.format import zstd_tile
from tdbfs.format.errors import FormatError
from tdbfs.format.tile import parse_chunk_headers, unfilter_tile
from tdbfs.mount.fuse_setup import choose_libfuse
from tdbfs.store import ArrayStore
from tdbfs.views.fragment_views import DECODE_AHEAD_MIN
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

CAPACITY = 50_000  # a0 tiles of 200 KB and d0 tiles of 400 KB: above DECODE_AHEAD_MIN, below 1 MiB
TILES = 4


def _sparse(path: Path) -> str:
    """One fragment of TILES full tiles; values that ZSTD really has to work on."""
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 1 << 40), tile=1 << 30, dtype=np.int64))
    attr = tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()]))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[attr], sparse=True, capacity=CAPACITY))
    cells = TILES * CAPACITY
    rng = np.random.default_rng(17)
    with tiledb.open(str(path), "w") as A:
        A[np.arange(cells, dtype=np.int64) * 3] = {"a": np.arange(cells, dtype=np.int32) + rng.integers(0, 64, cells,
                                                                                                           dtype=np.int32)}
    (name,) = os.listdir(path / "__fragments")
    return name


def _reference(path: Path) -> dict[str, bytes]:
    with tiledb.open(str(path)) as A:
        got = A.query(order="G")[:]
    return {"a0": got["a"].tobytes(), "d0": got["d"].astype(np.int64).tobytes()}


@pytest.fixture(scope="module")
def sparse_array(tmp_path_factory) -> tuple[Path, str, dict[str, bytes]]:
    path = tmp_path_factory.mktemp("throughput") / "sparse"
    name = _sparse(path)
    return path, name, _reference(path)


def _tile_paths(mnt: Path, name: str, folder: str) -> list[Path]:
    return [mnt / "fragments" / name / folder / f"tile_{k}.bin" for k in range(TILES)]


# -- decoding ahead, in process -------------------------------------------------------------

def test_small_sparse_tiles_are_decoded_ahead_once(sparse_array, monkeypatch):
    path, name, expected = sparse_array
    decoded = []
    real = fragment_module.unfilter_tile
    monkeypatch.setattr(fragment_module, "unfilter_tile", lambda *a, **k: decoded.append(a[5]) or real(*a, **k))
    store = ArrayStore(str(path))
    root = build_root(store)
    assert CAPACITY * 4 >= DECODE_AHEAD_MIN
    for stem, folder in (("a0", "attrs/a0"), ("d0", "dims/d0")):
        before_made = store.cache.made_ahead
        decoded.clear()
        pieces = []
        for k in range(TILES):
            node = resolve(root, f"fragments/{name}/{folder}/tile_{k}.bin")
            pieces.append(b"".join(bytes(node.read(off, 1 << 17)) for off in range(0, node.size(), 1 << 17)))
            store.cache.wait_idle()
        assert b"".join(pieces) == expected[stem]
        # tiles 1..3 were decoded ahead while the one before was read; each tile decoded once
        assert store.cache.made_ahead - before_made == TILES - 1
        assert sorted(decoded) == [f"tile {k}" for k in range(TILES)]


def test_decoding_ahead_stays_inside_the_cache_bound(sparse_array):
    path, name, expected = sparse_array
    # room for one and a half d0 tiles: the next tile has no room beside the one read, so none is
    # decoded ahead; room for two and a half: each next one is
    for tiles_room, ahead in ((1.5, 0), (2.5, TILES - 1)):
        bound = int(tiles_room * CAPACITY * 8)
        store = ArrayStore(str(path), cache_bytes=bound)
        root = build_root(store)
        got = []
        for k in range(TILES):
            node = resolve(root, f"fragments/{name}/dims/d0/tile_{k}.bin")
            got.append(bytes(node.read(0, node.size())))
            store.cache.wait_idle()
            assert store.cache.size_bytes <= bound
            assert store.cache.group_bytes("tile") <= bound
        assert b"".join(got) == expected["d0"]
        assert store.cache.made_ahead == ahead


# -- through a real mount -----------------------------------------------------------------

def test_every_tile_file_reads_as_tiledb_reads_it(sparse_array, mount):
    path, name, expected = sparse_array
    mnt = mount(path)
    for stem, folder in (("a0", "attrs/a0"), ("d0", "dims/d0")):
        tiles = _tile_paths(mnt, name, folder)
        out = subprocess.run(["cat", *map(str, tiles)], capture_output=True, check=True).stdout
        assert out == expected[stem]
        blocks = subprocess.run(["stat", "-c", "%o", str(tiles[0])], capture_output=True, text=True, check=True)
        assert blocks.stdout.strip() == str(1 << 20)  # cat and cp ask for 1 MiB at a time


def _requests(log: Path, start: int, pid: int) -> list[str]:
    """The opcodes of the requests process `pid` made, as libfuse's debug log shows them from byte
    `start` on (other processes may look at any mount meanwhile)."""
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return re.findall(rf"opcode: (\w+) \(\d+\), nodeid: \d+, insize: \d+, pid: {pid}\b", text)


def test_a_small_tile_is_one_read_request(sparse_array, mount, tmp_path):
    path, name, expected = sparse_array
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["-o", "debug", "--log", str(log)])
    tile = _tile_paths(mnt, name, "attrs/a0")[1]
    os.listdir(tile.parent)
    for _ in range(200):  # the daemon sets the read-ahead on a thread of its own once the mount is live
        if "read-ahead of" in log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    # under threads, a reply within REPLY_SENT_S of another thread's reply for a node that can change
    # carries the short attribute timeout (fuse_ops._attr_timeout_for): let the listing's replies pass
    time.sleep(4 * REPLY_SENT_S)
    start = log.stat().st_size
    cat = subprocess.Popen(["cat", str(tile)], stdout=subprocess.PIPE)
    out, _ = cat.communicate()
    assert cat.returncode == 0 and out == expected["a0"][CAPACITY * 4:2 * CAPACITY * 4]
    ops = _requests(log, start, cat.pid)
    assert ops[:2] == ["LOOKUP", "OPEN"], ops
    if choose_libfuse()[0] == 3:
        # the LOOKUP's attributes are kept (the tile is immutable): cat's fstat and its two reads past
        # the end ask no more (3 GETATTR with attr_timeout 0 for every node; 6 with auto_inval_data)
        assert ops.count("GETATTR") == 0, ops
    else:  # libfuse2 offers no per-node timeout
        assert ops.count("GETATTR") <= 3, ops
    text = log.read_text(errors="replace")
    dev = os.stat(mnt).st_dev
    ra = Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb")
    if os.geteuid() == 0 and "set to 1024 KiB" in text:
        assert ra.read_text().strip() == "1024"
        assert ops.count("READ") == 1, ops  # the whole 200 KB tile in one request
    else:  # not allowed to raise the read-ahead: said so, and the kernel's 256 KiB requests remain
        assert "read-ahead of" in text and "left as the kernel set it" in text
        assert ops.count("READ") <= 2, ops


def _run(cmd: list[str]) -> tuple[int, str]:
    """(pid, stdout) of a command that succeeds: its pid names its requests in the debug log."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out, _ = proc.communicate()
    assert proc.returncode == 0, cmd
    return proc.pid, out.decode("latin-1")


@pytest.mark.skipif(choose_libfuse()[0] != 3, reason="per-node attribute timeouts need libfuse3")
def test_a_summary_keeps_asking_for_its_size_after_a_tile_file_did_not(sparse_array, mount, tmp_path):
    """The attribute timeout is set per node, for the reply at hand: an immutable tile file's must not
    carry over to the next node's reply, or a summary's size would be kept and go stale."""
    path, name, _ = sparse_array
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["-o", "debug", "--log", str(log)])
    tile = _tile_paths(mnt, name, "attrs/a0")[0]
    summary = mnt / "fragments" / name / "fragment.yaml"
    size = len(summary.read_bytes())
    for _ in range(3):
        _run(["cat", str(tile)])
        start = log.stat().st_size
        pid, out = _run(["stat", "-c", "%s", str(summary)])
        assert int(out) == size
        ops = _requests(log, start, pid)
        assert "GETATTR" in ops or "LOOKUP" in ops, ops  # the daemon was asked: the size is its current one
    start = log.stat().st_size
    pid, out = _run(["stat", "-c", "%s", str(tile)])
    assert int(out) == CAPACITY * 4
    assert _requests(log, start, pid) == []  # the tile file's attributes are still the kernel's


@pytest.mark.parametrize("option", ["threads", "threads,max_threads=3"])
def test_threads_serve_eight_readers_the_same_bytes(sparse_array, mount, tmp_path, option):
    path, name, expected = sparse_array
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["-o", option, "--log", str(log), "--debug"])
    files = [(stem, k, p) for stem, folder in (("a0", "attrs/a0"), ("d0", "dims/d0"))
             for k, p in enumerate(_tile_paths(mnt, name, folder))]
    size = {"a0": CAPACITY * 4, "d0": CAPACITY * 8}
    got: dict[int, dict[int, bytes]] = {}

    def reader(i: int) -> None:
        order = list(range(i, len(files))) + list(range(i))  # each starts elsewhere; all overlap
        got[i] = {j: subprocess.run(["cat", str(files[j][2])], capture_output=True, check=True).stdout for j in order}

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = {j: expected[stem][k * size[stem]:(k + 1) * size[stem]] for j, (stem, k, _) in enumerate(files)}
    assert len(got) == 8
    for i in range(8):
        assert got[i] == want, f"reader {i}"
    # a local array gets twice as many request threads as cores, at least LOCAL_MIN_THREADS, unless
    # -o max_threads says otherwise (fuse_setup.FuseOptions.for_array), and each keeps its Python thread
    # state: one line per thread, not one per request
    text = log.read_text()
    limit = 3 if "max_threads" in option else max(LOCAL_MIN_THREADS, 2 * len(os.sched_getaffinity(0)))
    assert re.search(rf"mounting on .*[:,]max_threads={limit}(,|$)", text, re.M), text[:2000]
    kept = re.findall(r"request thread (\d+) keeps its Python thread state", text)
    assert 1 <= len(kept) == len(set(kept)) <= limit + 1, kept  # the workers, and the loop's own thread


def test_a_chunk_damaged_ahead_is_reported_by_the_real_read(tmp_path, mount):
    path = tmp_path / "sparse"
    name = _sparse(path)
    expected = _reference(path)
    store = ArrayStore(str(path))
    frag = store.fragments()[0]
    loc = frag.location(frag.field_by_stem("a0"), 2, "data")
    data = (path / "__fragments" / name / "a0.tdb").read_bytes()
    chunk = parse_chunk_headers(data, loc.file, loc.offset)[1]
    with open(path / "__fragments" / name / "a0.tdb", "r+b") as f:  # chunk 1's ZSTD frame: no magic number
        f.seek(chunk.data_offset)
        f.write(bytes(4))
    mnt = mount(path)
    tiles = _tile_paths(mnt, name, "attrs/a0")
    # reading tile 1 decodes tile 2 ahead, which fails there without a word
    assert subprocess.run(["cat", str(tiles[1])], capture_output=True, check=True).stdout == \
        expected["a0"][CAPACITY * 4:2 * CAPACITY * 4]
    res = subprocess.run(["cat", str(tiles[2])], capture_output=True)
    assert res.returncode != 0 and b"Input/output error" in res.stderr
    summary = yaml.safe_load((mnt / "fragments" / name / "fragment.yaml").read_text())
    problems = [p for p in summary["problems"] if p["structure"] == "tile 2"]
    assert len(problems) == 1, summary["problems"]
    assert problems[0]["file"] == f"__fragments/{name}/a0.tdb"
    assert problems[0]["offset"] == chunk.metadata_offset
    assert "chunk 1, filter ZSTD" in problems[0]["message"]
    # the daemon keeps serving: the next tile still reads
    assert subprocess.run(["cat", str(tiles[3])], capture_output=True, check=True).stdout == \
        expected["a0"][3 * CAPACITY * 4:]


def test_the_malloc_and_blas_settings_reach_the_daemon(sparse_array, mount, tmp_path):
    """The daemon tunes malloc itself (it is often a fork of `tdbfs mount`, past the process start where
    glibc reads MALLOC_*), and its log says what is in effect; a user's own settings win."""
    path, _, _ = sparse_array
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["--log", str(log)])
    (pid,) = daemon_pids(mnt, spawned_only=True)
    assert os.getsid(pid) == pid   # detached: a session of its own
    # ours, where the environment the tests run in sets nothing of its own
    ours = {k: os.environ.get(k, str(v)) for k, v in [*((k, v) for k, (_, v) in MALLOC_TUNING.items()),
                                                       *BLAS_ENV.items()]}
    assert f"environment: {' '.join(f'{k}={v}' for k, v in ours.items())}" in log.read_text()
    theirs = {"MALLOC_TOP_PAD_": "4096", "OPENBLAS_NUM_THREADS": "2"}
    log2 = tmp_path / "daemon2.log"
    mount(path, extra_args=["--log", str(log2)], env=theirs)
    line = next(ln for ln in log2.read_text().splitlines() if "environment:" in ln)
    assert "MALLOC_TOP_PAD_=4096 " in line and line.endswith(" OPENBLAS_NUM_THREADS=2")
    assert "MALLOC_MMAP_THRESHOLD_=33554432 " in line


#: malloc's state around one 16 MiB block, with or without tune_malloc (mallinfo2, glibc 2.33 and later)
MALLINFO = textwrap.dedent("""
    import ctypes, json, sys

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    tuned = None
    if sys.argv[1] == "tune":
        from tdbfs.mount.daemon import tune_malloc
        tuned = tune_malloc()
    block = libc.malloc(16 << 20)
    held = libc.mallinfo2()
    libc.free(block)
    freed = libc.mallinfo2()
    print(json.dumps({"tuned": tuned, "mapped_held": held.hblkhd, "heap_held": held.arena,
                      "heap_freed": freed.arena}))
""")


def test_tune_malloc_keeps_big_blocks_on_the_heap_and_the_heap_untrimmed():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def probe(mode):
        res = subprocess.run([sys.executable, "-c", MALLINFO, mode], capture_output=True, text=True, env=env,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    plain, tuned = probe("plain"), probe("tune")
    # glibc's default: a block this big is a mapping of its own, unmapped when freed
    assert plain["mapped_held"] >= 16 << 20
    assert tuned["tuned"] == {k: str(v) for k, (_, v) in MALLOC_TUNING.items()}
    # tuned: the block comes from the heap, grown with the top pad, and freeing it trims nothing
    assert tuned["mapped_held"] < 16 << 20
    assert tuned["heap_held"] >= (16 << 20) + (64 << 20)
    assert tuned["heap_freed"] == tuned["heap_held"]


def test_read_ahead_kb_is_an_option_of_tdbfs_not_of_libfuse():
    from tdbfs.mount.fuse_setup import FuseOptions
    assert FuseOptions().read_ahead_kb == 1024
    opts = FuseOptions.parse(["read_ahead_kb=0,allow_other"])
    assert opts.read_ahead_kb == 0 and "read_ahead_kb" not in opts.fuse_kwargs()
    assert FuseOptions.parse(["read_ahead_kb=4096"]).read_ahead_kb == 4096
    for bad in ("read_ahead_kb=-1", "read_ahead_kb=big"):
        with pytest.raises(ValueError, match="read_ahead_kb"):
            FuseOptions.parse([bad])


# -- ZSTD tiles decoded into one buffer, on two threads --------------------------------------

DENSE_TILE = 1 << 19  # int32 cells: 2 MiB tiles of 32 chunks, above zstd_tile.SPLIT_MIN_BYTES
DENSE_TILES = 3


@pytest.fixture(scope="module")
def dense_array(tmp_path_factory) -> tuple[Path, str, bytes]:
    path = tmp_path_factory.mktemp("throughput") / "dense"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, DENSE_TILE * DENSE_TILES - 1), tile=DENSE_TILE, dtype=np.int64))
    attr = tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()]))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[attr]))
    values = np.random.default_rng(5).integers(0, 1 << 20, DENSE_TILE * DENSE_TILES, dtype=np.int32)
    with tiledb.open(str(path), "w") as A:
        A[:] = values
    with tiledb.open(str(path)) as A:
        expected = A[:]["a"].tobytes()
    (name,) = os.listdir(path / "__fragments")
    return path, name, expected


class CountingPool(ThreadPoolExecutor):
    """A real one-thread pool that counts what it is handed."""

    def __init__(self):
        super().__init__(1, thread_name_prefix="test-decode")
        self.submitted = 0

    def submit(self, fn, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _decode_tile(frag, k: int, pool=None):
    """Tile k of a0 through `unfilter_tile`, as Fragment._decode calls it."""
    field = frag.field_by_stem("a0")
    loc = frag.location(field, k, "data")
    raw = frag.store.pread(loc.file, loc.offset, loc.persisted_size)
    return unfilter_tile(raw, loc.file, loc.offset, frag.pipeline(field, "data"), frag.filter_context(field, "data"),
                         f"tile {k}", expected_size=loc.unfiltered_size, base=loc.offset, pool=pool)


def test_a_zstd_tile_decodes_into_one_buffer_as_the_filters_do(dense_array, monkeypatch):
    path, _, expected = dense_array
    frag = ArrayStore(str(path)).fragments()[0]
    pool = CountingPool()
    fast = [_decode_tile(frag, k, pool) for k in range(DENSE_TILES)]
    alone = [_decode_tile(frag, k) for k in range(DENSE_TILES)]
    monkeypatch.setattr(zstd_tile, "applies", lambda pipeline, ctx: False)  # chunk by chunk, filter by filter
    general = [_decode_tile(frag, k) for k in range(DENSE_TILES)]
    assert pool.submitted == DENSE_TILES  # each 2 MiB tile's chunks were offered to the other thread
    assert b"".join(t.data for t in fast) == expected
    for a, b, c in zip(fast, alone, general):
        assert type(a.data) is bytearray and type(c.data) is bytes  # the fast path was taken, then not
        assert a.data == b.data == c.data
        assert len(a.chunks) == 32 and a.chunks == b.chunks == c.chunks  # what tile_K.yaml shows
        assert a.checksum_failures == c.checksum_failures == ()
    pool.shutdown()


def test_a_small_tile_stays_on_one_thread(sparse_array):
    path, _, expected = sparse_array
    frag = ArrayStore(str(path)).fragments()[0]
    pool = CountingPool()
    tile = _decode_tile(frag, 1, pool)
    assert pool.submitted == 0  # 200 KB: handing half over costs more than it saves
    assert tile.data == expected["a0"][CAPACITY * 4:2 * CAPACITY * 4]
    pool.shutdown()


def _damaged_copy(tmp_path: Path, dense_array, k: int, i: int):
    """(copy of the dense array, its a0 tile k's location, chunk i of it) with that chunk's zstd frame
    made to start without its magic number."""
    src, name, _ = dense_array
    path = tmp_path / "dense"
    shutil.copytree(src, path)
    frag = ArrayStore(str(path)).fragments()[0]
    loc = frag.location(frag.field_by_stem("a0"), k, "data")
    data_file = path / "__fragments" / name / "a0.tdb"
    chunk = parse_chunk_headers(data_file.read_bytes(), loc.file, loc.offset)[i]
    with open(data_file, "r+b") as f:
        f.seek(chunk.data_offset)
        f.write(bytes(4))
    return path, loc, chunk


def test_a_damaged_frame_is_reported_as_the_filters_word_it(tmp_path, dense_array, monkeypatch):
    _, name, expected = dense_array
    path, _, chunk = _damaged_copy(tmp_path, dense_array, 1, 20)  # a chunk the other thread may take
    errors = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(zstd_tile, "applies", lambda pipeline, ctx: False)
        store = ArrayStore(str(path))
        frag = store.fragments()[0]
        with pytest.raises(FormatError) as err:
            _decode_tile(frag, 1, CountingPool())
        errors.append((err.value.file, err.value.structure, err.value.offset, str(err.value)))
        # the tiles around it still decode
        assert _decode_tile(frag, 2).data == expected[2 * DENSE_TILE * 4:]
    assert errors[0] == errors[1]
    assert errors[0][:3] == (f"__fragments/{name}/a0.tdb", "tile 1", chunk.metadata_offset)
    assert "chunk 20, filter ZSTD" in errors[0][3]


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_daemon_decodes_big_tiles_on_two_threads(dense_array, mount, tmp_path):
    path, name, expected = dense_array
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["--log", str(log)])
    tiles = [mnt / "fragments" / name / "attrs" / "a0" / f"tile_{k}.bin" for k in range(DENSE_TILES)]
    assert subprocess.run(["cat", *map(str, tiles)], capture_output=True, check=True).stdout == expected
    assert "ZSTD tiles of 1 MiB and more decode on two threads" in log.read_text()


def test_a_stat_of_a_tile_file_starts_loading_numpy(sparse_array, mount):
    path, name, expected = sparse_array
    mnt = mount(path)
    (pid,) = daemon_pids(mnt, spawned_only=True)
    tile = _tile_paths(mnt, name, "dims/d0")[2]
    os.listdir(tile.parent)
    assert "_multiarray_umath" not in _maps(pid)  # a sparse fragment's tiles are listed without numpy
    assert tile.stat().st_size == CAPACITY * 8
    for _ in range(200):  # on a thread of its own, while nothing is read
        if "_multiarray_umath" in _maps(pid):
            break
        time.sleep(0.05)
    assert "_multiarray_umath" in _maps(pid)
    # one open: its fstat (kept with the handle) agrees with stat and with what is read
    with open(tile, "rb") as f:
        first = os.fstat(f.fileno())
        body = f.read()
        again = os.fstat(f.fileno())
    assert first.st_size == again.st_size == len(body) == CAPACITY * 8
    assert first.st_mtime_ns == again.st_mtime_ns and first.st_blksize == 1 << 20
    assert body == expected["d0"][2 * CAPACITY * 8:3 * CAPACITY * 8]


# -- one tile decoded by several threads; a tile served to its end makes way --------------------------

def test_several_threads_decode_one_tile_side_by_side(dense_array, monkeypatch):
    """Every thread offered the work takes chunks while the others do (a barrier holds the first chunk
    of each until both have one), and the tile is the same as decoded alone."""
    path, _, expected = dense_array
    frag = ArrayStore(str(path)).fragments()[0]
    both = threading.Barrier(2, timeout=10)
    takers: list[str] = []
    real = zstd_tile._decode_frame

    def frame(d, src, place):
        name = threading.current_thread().name
        if name not in takers:
            takers.append(name)
            both.wait()
        return real(d, src, place)

    monkeypatch.setattr(zstd_tile, "_decode_frame", frame)
    helpers: list[threading.Thread] = []

    def share(work):
        helpers.append(threading.Thread(target=work, name="helper"))
        helpers[-1].start()

    field = frag.field_by_stem("a0")
    loc = frag.location(field, 1, "data")
    raw = frag.store.pread(loc.file, loc.offset, loc.persisted_size)
    tile = unfilter_tile(raw, loc.file, loc.offset, frag.pipeline(field, "data"), frag.filter_context(field, "data"),
                         "tile 1", expected_size=loc.unfiltered_size, base=loc.offset, share=share)
    helpers[0].join(10)
    assert sorted(takers) == ["MainThread", "helper"]
    assert tile.data == expected[DENSE_TILE * 4:2 * DENSE_TILE * 4] and len(tile.chunks) == 32


def test_a_damaged_chunk_stops_every_thread_and_the_filters_report_it(tmp_path, dense_array):
    expected = dense_array[2]
    path, loc, chunk = _damaged_copy(tmp_path, dense_array, 0, 3)
    frag = ArrayStore(str(path)).fragments()[0]
    offered: list = []
    field = frag.field_by_stem("a0")
    raw = frag.store.pread(loc.file, loc.offset, loc.persisted_size)
    with pytest.raises(FormatError) as err:
        unfilter_tile(raw, loc.file, loc.offset, frag.pipeline(field, "data"), frag.filter_context(field, "data"),
                      "tile 0", expected_size=loc.unfiltered_size, base=loc.offset, share=offered.append)
    assert (err.value.structure, err.value.offset) == ("tile 0", chunk.metadata_offset)
    assert "chunk 3, filter ZSTD" in str(err.value)
    offered[0]()  # a helper that comes late finds nothing left to take, and returns
    assert _decode_tile(frag, 1).data == expected[DENSE_TILE * 4:2 * DENSE_TILE * 4]


def test_a_reader_asking_for_a_value_being_made_does_the_share_offered():
    cache = cache_module.ByteLRU(1 << 20)
    offered, helped = threading.Event(), threading.Event()

    def make():
        cache.offer_help(helped.set)
        offered.set()
        if not helped.wait(10):  # only the other reader's help lets this make finish
            raise AssertionError("nobody helped")
        return "made", 10

    maker = ThreadPoolExecutor(1).submit(cache.get_or_make, "k", make)
    assert offered.wait(10)
    assert cache.get_or_make("k", lambda: ("again", 10)) == "made"
    assert maker.result(10) == "made" and cache.misses == 1
    helped.clear()
    assert cache.get_or_make("k", lambda: ("again", 10)) == "made" and not helped.is_set()  # made: no help asked


def test_values_served_to_their_end_make_way_beyond_a_few():
    cache = cache_module.ByteLRU(1 << 20, served_keep=150)
    cache.put(("tile", 1), b"x" * 100, 100)
    cache.note_served(("tile", 1), 60, 100)
    cache.note_served(("tile", 1), 40, 100)
    assert cache.get(("tile", 1)) == b"x" * 100  # served to its end, and within what is kept of such
    cache.put(("tile", 2), b"y" * 100, 100)
    cache.note_served(("tile", 2), 100, 100)
    assert cache.get(("tile", 1)) is None and cache.get(("tile", 2)) == b"y" * 100  # the oldest made way
    assert cache.group_bytes("tile") == cache.size_bytes == 100
    cache.put(("tile", 1), b"z" * 100, 100)  # made again: counted again from zero
    cache.note_served(("tile", 1), 60, 100)
    assert cache.get(("tile", 1)) == b"z" * 100 and cache.get(("tile", 2)) == b"y" * 100
    cache.drop_served = False  # a mount with direct_io: the kernel keeps nothing it was served
    cache.put(("tile", 3), b"w" * 100, 100)
    cache.note_served(("tile", 3), 100, 100)
    cache.note_served(("tile", 1), 40, 100)
    assert [cache.get(("tile", k)) is not None for k in (1, 2, 3)] == [True, True, True]


def test_a_tile_file_read_to_its_end_leaves_the_cache_and_reads_again(sparse_array):
    path, name, expected = sparse_array
    store = ArrayStore(str(path))
    store.cache.served_keep = 0  # none kept: the one served goes at once
    root = build_root(store)
    frag = store.fragments()[0]
    field = frag.field_by_stem("a0")
    keys = [frag._tile_key(field, k, "data") for k in range(3)]
    node = resolve(root, f"fragments/{name}/attrs/a0/tile_0.bin")
    whole = node.size()
    got = bytes(node.read(0, whole // 2))
    store.cache.wait_idle()
    assert all(store.cache.get(key) is not None for key in keys)  # half read: kept; tiles 1 and 2 decoded ahead
    got += bytes(node.read(whole // 2, whole))
    assert got == expected["a0"][:whole]
    assert store.cache.get(keys[0]) is None  # served to its end: the page cache holds it now
    assert all(store.cache.get(key) is not None for key in keys[1:])
    assert bytes(node.read(0, whole)) == expected["a0"][:whole]  # asked again: decoded again, the same bytes
    store.cache.wait_idle()


def test_a_reader_helps_decode_the_tile_decoded_ahead(sparse_array, monkeypatch):
    """The reader of tile 1 finds it being decoded ahead (slowly, here) and takes chunks of it itself."""
    path, name, expected = sparse_array
    store = ArrayStore(str(path))
    root = build_root(store)
    started = threading.Event()
    takers: list[tuple[str, int]] = []
    real = zstd_tile._decode_frame

    def frame(d, src, place):
        ahead = threading.current_thread().name.startswith("tdbfs-ahead")
        takers.append((threading.current_thread().name, len(place)))
        if ahead and not started.is_set():  # the first chunk decoded ahead (of tile 1) takes its time
            started.set()
            time.sleep(0.5)
        return real(d, src, place)

    monkeypatch.setattr(zstd_tile, "_decode_frame", frame)
    monkeypatch.setattr(cache_module, "AHEAD_THREADS", 1)  # as on 2 cores, whatever this machine has
    tiles = [resolve(root, f"fragments/{name}/attrs/a0/tile_{k}.bin") for k in range(2)]
    size = tiles[0].size()
    assert bytes(tiles[0].read(0, size)) == expected["a0"][:size]  # decoded here; tiles 1 and 2 go ahead
    assert started.wait(10)
    mark = len(takers)  # the reader's 4 chunks of tile 0, and the first chunk of tile 1 (ahead, asleep on it)
    assert sorted(n for n, _ in takers) == ["MainThread"] * 4 + ["tdbfs-ahead_0"]
    assert bytes(tiles[1].read(0, size)) == expected["a0"][size:2 * size]
    assert [n for n, _ in takers[mark:mark + 3]] == ["MainThread"] * 3  # the other 3 of its 4 chunks: the reader's
    store.cache.wait_idle()


def test_a_direct_io_mount_keeps_tiles_it_served(dense_array, mount):
    """With direct_io the kernel keeps no page: a tile read again comes from the daemon's cache, not
    decoded again (the daemon reads none of the data file the second time), even past what is kept of
    tiles served to their end on other mounts (3 tiles of 2 MiB)."""
    from tdbfs.mount.fuse_setup import FuseOptions
    assert FuseOptions.parse(["direct_io"]).page_cache() is False and FuseOptions.parse([]).page_cache() is True
    assert DENSE_TILES * DENSE_TILE * 4 > cache_module.SERVED_KEEP
    path, name, expected = dense_array
    mnt = mount(path, extra_args=["-o", "direct_io"])
    (pid,) = daemon_pids(mnt, spawned_only=True)
    tiles = [str(mnt / "fragments" / name / "attrs" / "a0" / f"tile_{k}.bin") for k in range(DENSE_TILES)]
    stored = (path / "__fragments" / name / "a0.tdb").stat().st_size

    def bytes_read() -> int:
        return int(re.search(r"rchar: (\d+)", Path(f"/proc/{pid}/io").read_text()).group(1))

    assert subprocess.run(["cat", *tiles], capture_output=True, check=True).stdout == expected
    before = bytes_read()
    assert subprocess.run(["cat", *tiles], capture_output=True, check=True).stdout == expected
    assert bytes_read() - before < stored // 4, (bytes_read() - before, stored)
