"""Behaviour the speed work relies on (no timings here: scripts/bench measures them).

* fragment.yaml is rendered once per fragment state, and the commit listing behind it once per
  state of __commits/, yet a new commit still shows;
* finding one fragment (a FUSE lookup) does not list the others;
* a sequential reader of big tiles finds the next tile decoded ahead, decoded once, with TileDB's values;
* a walk over many fragments keeps a bounded number of parsed fragments and fragment nodes,
  and what was found wrong in a dropped fragment stays in array.yaml's problems;
* a daemon answers its first `ls fragments/` without importing a codec, PyYAML or cryptography,
  and finds libfuse without running ldconfig.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tiledb
import yaml

import tdbfs.store.base_store as base_store_module
import tdbfs.store.fragment as fragment_module
import tdbfs.views.tree as tree_module
import tdbfs.views.fragment_views as fragment_views
from tdbfs.mount.fuse_ops import FuseOSError, TdbfsOperations
from tdbfs.store import ArrayStore
from tdbfs.views.fragment_views import DECODE_AHEAD_TILES
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root


def _dense(path, fragments: int, tile: int = 4, cells: int = 8, filters=None):
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, cells - 1), tile=tile, dtype=np.int64))
    attr = tiledb.Attr("a", dtype=np.int32, filters=filters or tiledb.FilterList([tiledb.ZstdFilter()]))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[attr], sparse=False))
    for i in range(fragments):
        with tiledb.open(str(path), "w", timestamp=i + 1) as A:
            A[0:cells] = {"a": np.arange(cells, dtype=np.int32) * (i + 1)}
    return sorted(os.listdir(path / "__fragments"))


def _age(path, seconds: float) -> None:
    """Put the mtimes of the array root and __commits/ in the past (directory mtimes tick coarsely,
    so the store trusts them only once they are a second old)."""
    t = time.time() - seconds
    for d in (path, path / "__commits"):
        os.utime(d, (t, t))


def _read(root, path):
    node = resolve(root, path)
    data = node.read(0, node.size())
    assert len(data) == node.size()
    return data


def test_fragment_yaml_is_rendered_once_per_state(tmp_path, monkeypatch):
    path = tmp_path / "arr"
    names = _dense(path, 2)
    _age(path, 100)
    store = ArrayStore(str(path))
    root = build_root(store)
    renders, listings = [], []
    real_summary, real_commits = fragment_views.fragment_summary, store.commit_files
    monkeypatch.setattr(fragment_views, "fragment_summary", lambda f: renders.append(f.name) or real_summary(f))
    monkeypatch.setattr(store, "commit_files", lambda: listings.append(1) or real_commits())

    first = [yaml.safe_load(_read(root, f"fragments/{n}/fragment.yaml")) for n in names]
    for _ in range(5):  # stats and reads of an unchanged fragment: no new render
        for n in names:
            assert yaml.safe_load(_read(root, f"fragments/{n}/fragment.yaml")) in first
    assert sorted(renders) == sorted(names)
    # __commits listed once, for the vacuum lists: each fragment's commit file is found by lstat
    assert len(listings) == 1
    assert all(f["committed"] and f["commit_file"].startswith("__commits/") for f in first)
    assert [f["name"] for f in first] == names

    # A new fragment (a new commit): the state changed, so fragment.yaml is rendered again.
    with tiledb.open(str(path), "w", timestamp=10) as A:
        A[0:8] = {"a": np.zeros(8, dtype=np.int32)}
    _age(path, 50)
    again = yaml.safe_load(_read(root, f"fragments/{names[0]}/fragment.yaml"))
    assert renders.count(names[0]) == 2
    assert again == first[0]
    (new,) = set(os.listdir(path / "__fragments")) - set(names)
    assert yaml.safe_load(_read(root, f"fragments/{new}/fragment.yaml"))["committed"] is True


def test_commit_state_is_not_trusted_within_a_second(tmp_path):
    path = tmp_path / "arr"
    names = _dense(path, 1)
    store = ArrayStore(str(path))
    assert store.commits_state() is None  # __commits/ changed just now: re-read every time
    os.remove(path / "__commits" / f"{names[0]}.wrt")
    root = build_root(store)
    assert yaml.safe_load(_read(root, f"fragments/{names[0]}/fragment.yaml"))["committed"] is False
    _age(path, 100)
    assert store.commits_state() is not None
    assert store.committed_fragment_names() == {}


def test_a_lookup_of_one_fragment_does_not_list_the_others(tmp_path, monkeypatch):
    path = tmp_path / "arr"
    names = _dense(path, 3)
    store = ArrayStore(str(path))
    ops = TdbfsOperations(build_root(store))
    listed = []
    real = store.fragment_paths
    monkeypatch.setattr(store, "fragment_paths", lambda: listed.append(1) or real())

    st = ops.getattr(f"/fragments/{names[1]}/footer.yaml")
    fh = ops.open(f"/fragments/{names[1]}/footer.yaml", os.O_RDONLY)
    data = ops.read(f"/fragments/{names[1]}/footer.yaml", st["st_size"], 0, fh)
    assert listed == []
    footer = yaml.safe_load(data)
    assert footer["version"] == tiledb.array_fragments(str(path))[1].version
    with pytest.raises(FuseOSError) as err:
        ops.getattr("/fragments/__1_1_00000000000000000000000000000000_22/footer.yaml")
    assert err.value.errno == errno.ENOENT
    assert listed == []
    # readdir still lists every fragment, and fragment_exists in commits/ agrees with it
    assert sorted(e[0] for e in ops.readdir("/fragments", 0))[2:] == names
    commit = yaml.safe_load(_read(build_root(store), f"commits/{names[0]}.wrt.yaml"))
    assert commit["fragment_exists"] is True
    os.rename(path / "__fragments" / names[0], tmp_path / "moved")
    assert store.fragment_path_of(names[0]) is None
    assert yaml.safe_load(_read(build_root(store), f"commits/{names[0]}.wrt.yaml"))["fragment_exists"] is False


def _three_big_tiles(tmp_path, monkeypatch):
    """(array, its fragment, its values, the tiles decoded from now on by their offsets): a dense array of
    three 1 MiB int32 tiles, big enough to decode ahead."""
    path = tmp_path / "big"
    tile = 1 << 18
    (name,) = _dense(path, 1, tile=tile, cells=3 * tile)
    with tiledb.open(str(path)) as A:
        expected = A[:]["a"]
    calls = []
    real = fragment_module.unfilter_tile
    monkeypatch.setattr(fragment_module, "unfilter_tile",
                        lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    return path, name, expected, calls


def _read_in_pieces(node, store) -> bytes:
    """The whole file in the kernel's 128 KiB pieces, as `cat` reads it, each piece's decoding ahead done."""
    out = []
    for off in range(0, node.size(), 1 << 17):
        out.append(bytes(node.read(off, 1 << 17)))
        store.cache.wait_idle()
    return b"".join(out)


def test_the_next_big_tile_is_decoded_ahead_once(tmp_path, monkeypatch):
    path, name, expected, calls = _three_big_tiles(tmp_path, monkeypatch)
    store = ArrayStore(str(path))
    root = build_root(store)
    folder = f"fragments/{name}/attrs/a0"
    t0 = resolve(root, f"{folder}/tile_0.bin")
    first = t0.read(0, 1 << 17)  # the first piece of tile 0, as the kernel asks for it
    store.cache.wait_idle()
    # tile 0, and the next DECODE_AHEAD_TILES (here both others) ahead
    assert len(calls) == 3 and store.cache.made_ahead == DECODE_AHEAD_TILES == 2
    data = [bytes(first) + bytes(t0.read(1 << 17, t0.size()))]
    for k in (1, 2):
        node = resolve(root, f"{folder}/tile_{k}.bin")
        data.append(b"".join(node.read(off, 1 << 17) for off in range(0, node.size(), 1 << 17)))
        store.cache.wait_idle()
    assert len(calls) == 3  # every tile decoded once, none past the last
    assert np.array_equal(np.frombuffer(b"".join(data), np.int32), expected)


def test_a_tile_is_not_decoded_ahead_where_it_would_push_out_the_tile_being_read(tmp_path, monkeypatch):
    """A tile area of one and a half tiles: decoding the next tile ahead would push out the one being
    read, which the reader's next piece would then decode again (and again). So nothing is decoded
    ahead there, and each tile is decoded once."""
    from tdbfs.store.cache import ByteLRU
    path, name, expected, calls = _three_big_tiles(tmp_path, monkeypatch)
    store = ArrayStore(str(path), cache=ByteLRU(64 << 20, group_capacity={"tile": 3 << 19}))
    root = build_root(store)
    data = [_read_in_pieces(resolve(root, f"fragments/{name}/attrs/a0/tile_{k}.bin"), store) for k in range(3)]
    assert len(calls) == 3 and store.cache.made_ahead == 0
    assert np.array_equal(np.frombuffer(b"".join(data), np.int32), expected)
    # with room for two tiles beside the one read, both next tiles are decoded ahead, as before
    calls.clear()
    store = ArrayStore(str(path), cache=ByteLRU(64 << 20, group_capacity={"tile": 3 << 20}))
    node = resolve(build_root(store), f"fragments/{name}/attrs/a0/tile_0.bin")
    node.read(0, 1 << 17)
    store.cache.wait_idle()
    assert len(calls) == 3 and store.cache.made_ahead == 2


def test_a_tile_read_already_is_not_decoded_ahead_again(tmp_path, monkeypatch):
    """Readers of different tiles at once: a tile another reader has read to its end is in the page
    cache, so a reader before it does not decode it again as its next tile."""
    from tdbfs.store.cache import ByteLRU
    path, name, expected, calls = _three_big_tiles(tmp_path, monkeypatch)
    store = ArrayStore(str(path), cache=ByteLRU(64 << 20, served_keep=0))  # served tiles go at once
    root = build_root(store)
    tiles = {k: _read_in_pieces(resolve(root, f"fragments/{name}/attrs/a0/tile_{k}.bin"), store) for k in (1, 2, 0)}
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 3 and store.cache.made_ahead == 1  # 2, after 1
    assert np.array_equal(np.frombuffer(b"".join(tiles[k] for k in range(3)), np.int32), expected)
    # a reader that comes back to a tile the page cache no longer holds has it decoded again
    again = _read_in_pieces(resolve(root, f"fragments/{name}/attrs/a0/tile_1.bin"), store)
    assert again == tiles[1] and len(calls) == 4


def test_a_tile_that_fails_ahead_is_reported_by_the_real_read(tmp_path):
    path = tmp_path / "big"
    tile = 1 << 18
    (name,) = _dense(path, 1, tile=tile, cells=2 * tile)
    store = ArrayStore(str(path))
    root = build_root(store)
    frag = store.fragments()[0]
    field = frag.field_by_stem("a0")
    loc = frag.location(field, 1, "data")
    with open(path / "__fragments" / name / "a0.tdb", "r+b") as f:  # tile 1's chunk count: absurd
        f.seek(loc.offset)
        f.write((1 << 40).to_bytes(8, "little"))
    t0 = resolve(root, f"fragments/{name}/attrs/a0/tile_0.bin")
    assert len(t0.read(0, 1 << 17)) == 1 << 17
    store.cache.wait_idle()
    assert frag.problems.items == []  # the failure ahead is not a problem of its own
    t1 = resolve(root, f"fragments/{name}/attrs/a0/tile_1.bin")
    with pytest.raises(Exception):
        t1.read(0, 1 << 17)
    assert [p.structure for p in frag.problems.items] == ["tile 1"]


def test_decoded_tiles_have_their_own_bound_inside_the_cache():
    from tdbfs.store.cache import ByteLRU
    cache = ByteLRU(1000, group_capacity={"tile": 300})
    made = []

    def make(name, cost):
        return lambda: made.append(name) or (name, cost)

    for k in range(5):  # five 100-byte tiles: only the last three stay
        assert cache.get_or_make(("tile", k), make(f"t{k}", 100)) == f"t{k}"
    cache.get_or_make(("txt", 0), make("x", 500))
    assert cache.group_bytes("tile") == 300 and cache.size_bytes == 800
    assert [k for k in range(5) if cache.get(("tile", k)) is not None] == [2, 3, 4]
    assert cache.get(("txt", 0)) == "x"  # other entries are not pushed out by tiles
    cache.get(("tile", 2))  # recently used: tile 3 is now the oldest tile
    cache.get_or_make(("tile", 5), make("t5", 100))
    assert [k for k in range(6) if cache.get(("tile", k)) is not None] == [2, 4, 5]
    # bigger than the tile bound: kept alone, so reading it in pieces decodes it once
    assert cache.get_or_make(("tile", 6), make("big", 301)) == "big"
    assert cache.get_or_make(("tile", 6), make("big", 301)) == "big" and made.count("big") == 1
    assert [k for k in range(7) if cache.get(("tile", k)) is not None] == [6] and cache.group_bytes("tile") == 301
    cache.get_or_make(("tile", 7), make("t7", 100))  # the next tile pushes it out
    assert [k for k in range(8) if cache.get(("tile", k)) is not None] == [7]
    cache.get_or_make(("txt", 1), make("y", 600))  # the whole bound still applies: oldest entries go first
    assert cache.size_bytes <= 1000 and cache.get(("txt", 1)) == "y"
    assert cache.group_bytes("tile") == sum(100 for k in range(8) if cache.get(("tile", k)) is not None)
    assert made.count("t0") == 1 and made.count("t2") == 1
    assert cache.get_or_make(("tile", 9), make("huge", 1001)) == "huge"  # bigger than the whole bound: not kept
    assert cache.get(("tile", 9)) is None


def test_a_value_is_made_ahead_only_where_it_fits_beside_the_ones_being_read():
    from tdbfs.store.cache import ByteLRU
    for drop_served in (True, False):  # False: a mount with -o direct_io keeps served tiles
        cache = ByteLRU(1000, group_capacity={"tile": 300})
        cache.drop_served = drop_served
        cache.put(("tile", 0), "t0", 100)  # two tiles being read
        cache.put(("tile", 1), "t1", 100)
        assert not cache.make_soon(("tile", 2), lambda: ("t2", 150), 150)  # 200 + 150 > 300
        cache.note_served(("tile", 0), 60, 100)
        assert not cache.make_soon(("tile", 2), lambda: ("t2", 150), 150)  # tile 0 is not read to its end
        cache.note_served(("tile", 0), 40, 100)  # now it is: its room counts as free
        # the tile a reader is on takes room even before it is made
        assert not cache.make_soon(("tile", 2), lambda: ("t2", 150), 150, (("tile", 5), 100))
        assert cache.make_soon(("tile", 2), lambda: ("t2", 150), 150, (("tile", 1), 100))  # t1: counted once
        assert not cache.make_soon(("tile", 3), lambda: ("t3", 100), 100)  # t2 on its way takes its room
        cache.wait_idle()
        assert cache.get(("tile", 2)) == "t2" and cache.get(("tile", 1)) == "t1"
        assert cache.get(("tile", 0)) is None and cache.made_ahead == 1
        # other keys count against the whole bound, the same way
        assert not cache.make_soon(("txt", 0), lambda: ("x", 800), 800)
        assert cache.make_soon(("txt", 0), lambda: ("x", 500), 500)


def test_a_mount_reports_a_bad_array_before_a_bad_mount_point(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, "-m", "tdbfs.cli", "mount", str(tmp_path / "missing"),
                          str(tmp_path / "nomnt")], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [f"tdbfs: error: array not found: {tmp_path / 'missing'}"]
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (tmp_path / "empty").mkdir()
    res = subprocess.run([sys.executable, "-m", "tdbfs.cli", "mount", str(tmp_path / "empty"), str(mnt)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 1 and "not a TileDB array" in res.stderr
    ps = subprocess.run(["ps", "axww", "-o", "args"], capture_output=True, text=True).stdout
    assert str(mnt) not in ps  # the daemon started alongside the check is gone
    assert not os.path.ismount(mnt)


def test_listing_fragments_and_commits_makes_no_node(tmp_path):
    import stat
    path = tmp_path / "arr"
    names = _dense(path, 3)
    store = ArrayStore(str(path))
    ops = TdbfsOperations(build_root(store))
    entries = ops.readdir("/fragments", 0)[2:]
    assert [e[0] for e in entries] == names and all(stat.S_ISDIR(e[1]) for e in entries)
    assert store.loaded_fragments() == []  # no Fragment made for a listing
    commits = ops.readdir("/commits", 0)[2:]
    assert sorted(e[0] for e in commits if e[0].endswith(".yaml")) == [n + ".wrt.yaml" for n in names]
    assert {e[0]: stat.S_ISDIR(e[1]) for e in commits if not e[0].endswith(".yaml")} == {"layout": True, "hex": True}
    assert all(stat.S_ISREG(e[1]) for e in commits if e[0].endswith(".yaml"))
    # the modes handed out are those of the nodes
    st = ops.getattr(f"/fragments/{names[0]}")
    assert stat.S_ISDIR(st["st_mode"]) and [f.name for f in store.loaded_fragments()] == [names[0]]
    assert stat.S_ISREG(ops.getattr(f"/commits/{names[0]}.wrt.yaml")["st_mode"])
    kids = resolve(build_root(store), "fragments").children()
    assert list(kids) == names and names[1] in kids and "nope" not in kids and len(kids) == 3
    with pytest.raises(KeyError):
        kids["nope"]


def test_a_walk_keeps_a_bounded_number_of_fragments(tmp_path, monkeypatch):
    monkeypatch.setattr(base_store_module, "FRAGMENTS_KEPT", 2)
    monkeypatch.setattr(tree_module, "FRAGMENT_NODES_KEPT", 2)
    path = tmp_path / "arr"
    names = _dense(path, 5)
    with open(path / "__fragments" / names[0] / "__fragment_metadata.tdb", "r+b") as f:
        f.seek(-8, os.SEEK_END)   # the footer length: absurd
        f.write((1 << 40).to_bytes(8, "little"))
    store = ArrayStore(str(path))
    root = build_root(store)
    fragments = resolve(root, "fragments")
    first_footers = {}
    for name in names:
        node = fragments.child(name)
        try:
            first_footers[name] = _read(root, f"fragments/{name}/footer.yaml")
        except Exception:
            first_footers[name] = None
        assert len(store.loaded_fragments()) <= 2 and len(fragments._nodes) <= 2
        assert node is fragments.child(name)  # the node in use stays the same
    assert first_footers[names[0]] is None and all(first_footers[n] for n in names[1:])
    assert names[0] not in [f.name for f in store.loaded_fragments()]
    damaged = [p for p in store.all_problems() if names[0] in p.file]
    assert damaged and "footer" in yaml.safe_load(_read(root, "array.yaml"))["problems"][0]["structure"]
    # parsed again on demand, to the same bytes; the problem is not doubled
    assert _read(root, f"fragments/{names[1]}/footer.yaml") == first_footers[names[1]]
    with pytest.raises(Exception):
        _read(root, f"fragments/{names[0]}/footer.yaml")
    assert [p for p in store.all_problems() if names[0] in p.file] == damaged


STARTUP = textwrap.dedent("""
    import json, subprocess, sys
    def no_subprocess(*a, **k):
        raise AssertionError("a subprocess at start-up: " + repr(a[0] if a else k.get("args")))
    subprocess.Popen = no_subprocess
    from tdbfs import cli  # noqa: F401
    from tdbfs.mount import fuse_loop, fuse_ops, fuse_setup  # noqa: F401 - imported as the daemon imports it
    from tdbfs.store import ArrayStore
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root
    major, path = fuse_setup.choose_libfuse()
    root = build_root(ArrayStore(sys.argv[1]))
    names = list(resolve(root, "fragments").children())
    first = sorted(m for m in ("yaml", "zstandard", "lz4", "blosc", "cryptography", "PIL", "hashlib")
                   if m in sys.modules)
    footer = resolve(root, "fragments/" + names[0] + "/footer.yaml")
    footer.read(0, footer.size())
    later = sorted(m for m in ("yaml", "zstandard", "cryptography", "PIL") if m in sys.modules)
    print(json.dumps({"names": names, "libfuse": path, "first": first, "later": later}))
""")


def test_a_daemon_starts_without_codecs_yaml_or_ldconfig(tmp_path):
    path = tmp_path / "arr"
    names = _dense(path, 2)
    res = subprocess.run([sys.executable, "-c", STARTUP, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert sorted(out["names"]) == names
    assert out["libfuse"] and "fuse" in out["libfuse"]   # found by the dynamic linker, no ldconfig -p
    assert out["first"] == []                              # nothing of these for a listing
    # footer.yaml needs the codec of the schema it names, never PyYAML (views/simple_yaml.py), cryptography or Pillow
    assert "zstandard" in out["later"] and not {"yaml", "cryptography", "PIL"} & set(out["later"])
