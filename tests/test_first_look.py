"""A complete first look (issue 35, item 9): a fresh mount of a local array checks its metadata by itself,
and array.yaml, polled and nothing else read, comes to list what `tdbfs check` prints for it, with
`checked:` saying how far its list goes; `-o check=full` adds the data tiles, `-o check=off` checks
nothing. Real arrays from tiledb-py, damaged by hand (tests/damage.py's byte layouts), real mounts."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import arrays
import damage
from damage import mount_tracked, read_view

#: how long a poll of array.yaml may wait for the background check (a bound against a hang, not a timing)
POLL_BOUND_S = 60.0


def _overwrite(path: Path, field_name: str, kind: str, which: int = 0) -> None:
    """Set the bytes of `field_name` of the `which`-th tile of `path` (damage.layout's names) to 0xff."""
    data = bytearray(path.read_bytes())
    lay = damage.layout(bytes(data), kind)
    label = lay.tiles[which][2]
    at, width, _ = next(f for f in lay.fields if f[2] == f"{label} {field_name}")
    data[at:at + width] = b"\xff" * width
    path.write_bytes(bytes(data))


def _build(tmp_path: Path, data_damage: bool) -> Path:
    """4 sparse fragments; two with a damaged `__fragment_metadata.tdb` (a generic tile's chunk count,
    the R-tree tile's first chunk size), and with `data_damage` a third whose first a0 tile (ZSTD) has
    a chunk size that cannot be: only decoding finds each."""
    built = arrays.build_sparse(tmp_path / "arr", ndim=2, capacity=3, cells=12, n_fragments=4)
    frags = sorted(built.fragments())
    md = "__fragment_metadata.tdb"
    _overwrite(built.path / "__fragments" / frags[0] / md, "nchunks", "fragment_metadata", which=3)
    _overwrite(built.path / "__fragments" / frags[1] / md, "chunk 0 unfiltered_size", "fragment_metadata")
    if data_damage:
        _overwrite(built.path / "__fragments" / frags[2] / "a0.tdb", "chunk 0 unfiltered_size", "data")
    return built.path


def _keys(problems: list) -> list:
    return sorted(tuple(str(p[k]) for k in damage.PROBLEM_KEYS) for p in problems)


def _check(array: Path) -> list:
    doc, err, _ = damage.run_check(array)
    assert err is None, err
    return doc["problems"]


def _poll(mnt: Path) -> tuple[dict, float]:
    """array.yaml, read again until the background check says it is done (nothing else is read)."""
    t0 = time.monotonic()
    while True:
        # one open serves one rendering, and its fstat agrees (a stat before the open may see an earlier one:
        # the check goes on meanwhile)
        data, err, _, fst = read_view(mnt / "array.yaml")
        assert err is None and fst == len(data), (err, fst, len(data or b""))
        doc = yaml.safe_load(data)
        if doc["checked"]["background"].endswith(", done"):
            return doc, time.monotonic() - t0
        assert time.monotonic() - t0 < POLL_BOUND_S, f"the background check never ended: {doc['checked']}"
        time.sleep(0.1)


def _array_files(array: Path) -> int:
    n = 0
    for folder in ("__schema", "__meta", "__commits", "__fragment_meta", "__schema/__enumerations"):
        p = array / folder
        if p.is_dir():
            n += sum(1 for e in p.iterdir() if e.is_file())
    return n


def _decode_only(check_problems: list, array_yaml_before: list) -> list:
    """What check finds that the listings alone do not show (the first array.yaml of a mount with check=off)."""
    listed = set(_keys(array_yaml_before))
    return [p for p in check_problems if tuple(str(p[k]) for k in damage.PROBLEM_KEYS) not in listed]


def test_a_fresh_mount_shows_what_check_finds_in_the_metadata(tmp_path):
    array = _build(tmp_path, data_damage=False)
    expected = _check(array)
    structures = {p["structure"] for p in expected}
    assert any("generic tile" in s for s in structures), expected   # decoding finds them, not the listings
    with mount_tracked(array) as mnt:
        doc, took = _poll(mnt)
    print(f"array.yaml complete after {took:.2f} s")
    assert _keys(doc["problems"]) == _keys(expected)
    n = len(os.listdir(array / "__fragments"))
    assert doc["checked"] == {"array_files": f"{_array_files(array)} of {_array_files(array)}",
                              "metadata": f"{n} of {n} fragments", "tiles": f"0 of {n} fragments",
                              "background": "metadata, done"}
    assert list(doc)[:2] == ["uri", "checked"]   # at the top


def test_check_full_finds_the_damaged_data_tile_too_and_metadata_does_not(tmp_path):
    array = _build(tmp_path, data_damage=True)
    expected = _check(array)
    tile_problems = [p for p in expected if p["file"].endswith("/a0.tdb")]
    assert tile_problems, expected
    n = len(os.listdir(array / "__fragments"))
    with mount_tracked(array, extra_args=["-o", "check=full"]) as mnt:
        full, took = _poll(mnt)
    print(f"array.yaml complete after {took:.2f} s (check=full)")
    assert _keys(full["problems"]) == _keys(expected)
    assert full["checked"]["tiles"] == f"{n} of {n} fragments" and full["checked"]["background"] == "full, done"
    with mount_tracked(array) as mnt:
        meta, _ = _poll(mnt)
    assert _keys(meta["problems"]) == _keys([p for p in expected if p not in tile_problems])
    assert meta["checked"]["tiles"] == f"0 of {n} fragments"


def test_check_off_checks_nothing_and_says_so(tmp_path):
    array = _build(tmp_path, data_damage=False)
    expected = _check(array)
    n = len(os.listdir(array / "__fragments"))
    with mount_tracked(array, extra_args=["-o", "check=off"]) as mnt:
        first = yaml.safe_load(read_view(mnt / "array.yaml")[0])
        time.sleep(1.5)   # the time a metadata check of this array takes (test above), to see it did not run
        later = yaml.safe_load(read_view(mnt / "array.yaml")[0])
    for doc in (first, later):
        assert doc["checked"] == {"array_files": f"0 of {_array_files(array)}", "metadata": f"0 of {n} fragments",
                                  "tiles": f"0 of {n} fragments", "background": "not running"}
        assert _decode_only(expected, doc["problems"]), "check=off found what only decoding finds"


def test_a_bad_check_option_is_a_usage_error(tmp_path):
    array = _build(tmp_path, data_damage=False)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = subprocess.run([sys.executable, "-m", "tdbfs.cli", "mount", "-o", "check=some", str(array), str(mnt)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "mount option 'check' takes one of off, metadata, full" in res.stderr


def _many_tiles(tmp_path: Path) -> Path:
    """One sparse fragment of 30,000 tiles per field: a full check of it takes many seconds."""
    import numpy as np
    import tiledb
    path = tmp_path / "big"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 10**6), tile=1000, dtype="int64"))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, sparse=True, capacity=1,
                                                      attrs=[tiledb.Attr("a", dtype="int32")]))
    with tiledb.open(str(path), "w") as A:
        A[np.arange(30000)] = {"a": np.arange(30000, dtype=np.int32)}
    return path


def test_unmount_stops_the_background_check(tmp_path):
    array = _many_tiles(tmp_path)
    log = tmp_path / "daemon.log"
    with mount_tracked(array, extra_args=["-o", "check=full", "--log", str(log)]) as mnt:
        pid = damage.daemon_pid(mnt)
        doc = yaml.safe_load(read_view(mnt / "array.yaml")[0])
        assert doc["checked"]["background"] == "full, running", doc["checked"]
        # let it get going: the tiles of the one fragment are checked one by one
        deadline = time.monotonic() + POLL_BOUND_S
        while "background check (full)" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "started" in log.read_text()
    t0 = time.monotonic()
    while damage.alive(pid) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert not damage.alive(pid), "the daemon outlived its unmount by 10 s"
    text = log.read_text()
    assert "unmounted" in text and "Traceback" not in text


def test_the_library_says_how_far_its_list_goes(tmp_path):
    """No background thread: array.yaml says nothing is checked, until `check` has run in the same store."""
    from tdbfs.check.check import check_array
    from tdbfs.store.open_array import open_location
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root

    array = _build(tmp_path, data_damage=False)
    n = len(os.listdir(array / "__fragments"))
    files = _array_files(array)
    res = subprocess.run([sys.executable, "-m", "tdbfs.cli", "cat", str(array), "array.yaml"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load(res.stdout)["checked"] == {
        "array_files": f"0 of {files}", "metadata": f"0 of {n} fragments", "tiles": f"0 of {n} fragments",
        "background": "not running"}
    store = open_location(str(array), 64 << 20)
    node = resolve(build_root(store), "array.yaml")
    result = check_array(store)
    doc = yaml.safe_load(node.fresh())
    assert doc["checked"] == {"array_files": f"{files} of {files}", "metadata": f"{n} of {n} fragments",
                              "tiles": f"{n} of {n} fragments", "background": "not running"}
    assert _keys(doc["problems"]) == _keys([p.to_dict() for p in result.problems])


def test_a_fresh_mount_of_a_group_checks_every_member(tmp_path):
    """group.yaml says how many members are checked; each member's array.yaml then lists what `tdbfs check`
    of that member prints."""
    import tiledb
    grp = tmp_path / "grp"
    tiledb.Group.create(str(grp))
    damaged = _build(grp / "damaged_build", data_damage=False)   # grp/damaged_build/arr
    clean = arrays.build_sparse(grp / "clean", ndim=2, capacity=3, cells=5, n_fragments=2).path
    with tiledb.Group(str(grp), "w") as g:
        g.add("damaged_build/arr", name="bad", relative=True)
        g.add("clean", name="good", relative=True)
    expected_bad, expected_good = _check(damaged), _check(clean)
    assert any("generic tile" in p["structure"] for p in expected_bad)
    with mount_tracked(grp) as mnt:
        t0 = time.monotonic()
        while True:
            doc = yaml.safe_load(read_view(mnt / "group.yaml")[0])
            if doc["checked"]["background"].endswith(", done") and doc["checked"]["members"] == "2 of 2 checked":
                break
            assert time.monotonic() - t0 < POLL_BOUND_S, doc["checked"]
            time.sleep(0.1)
        print(f"group.yaml complete after {time.monotonic() - t0:.2f} s")
        assert doc["checked"]["group_files"] == "1 of 1" and list(doc)[:2] == ["uri", "checked"]
        bad = yaml.safe_load(read_view(mnt / "members" / "bad" / "array.yaml")[0])
        good = yaml.safe_load(read_view(mnt / "members" / "good" / "array.yaml")[0])
    assert _keys(bad["problems"]) == _keys(expected_bad)
    assert _keys(good["problems"]) == _keys(expected_good)
    assert bad["checked"]["metadata"] == "4 of 4 fragments" and good["checked"]["metadata"] == "2 of 2 fragments"


def test_the_background_check_waits_while_a_request_is_in_flight(tmp_path, monkeypatch):
    """In one process, without FUSE: while a request is in flight (and with no patience left to it), no unit
    runs; once it ends the check runs to its end, and stop() ends the thread."""
    import tdbfs.check.background as bc
    from tdbfs.store.open_array import open_location

    monkeypatch.setattr(bc, "PATIENCE_S", 3600.0)
    array = _build(tmp_path, data_damage=False)
    n = len(os.listdir(array / "__fragments"))
    store = open_location(str(array), 64 << 20)
    requests = bc.Requests()
    check = bc.BackgroundCheck(store, bc.METADATA, requests)
    requests.__enter__()   # a request that takes its time
    try:
        check.start()
        time.sleep(1.0)
        assert store.checked.summary(store, [], store.fragment_paths())["metadata"] == f"0 of {n} fragments"
        assert check._thread.is_alive()
    finally:
        requests.__exit__(None, None, None)
    deadline = time.monotonic() + POLL_BOUND_S
    while store.checked.background_state() != "metadata, done" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.checked.summary(store, [], store.fragment_paths())["metadata"] == f"{n} of {n} fragments"
    assert _keys([p.to_dict() for p in store.findings()]) == _keys(_check(array))
    check.stop()
    assert not check._thread.is_alive()
