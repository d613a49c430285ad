"""Real mounts of real arrays, read with cat, ls, stat, grep, cp, find: content checked.

The mounted bytes must be the same as the store-level views (checked against
TileDB in test_tiles_match_tiledb), stat sizes exact, writes refused, the array
untouched, and fragments that come and go while mounted must show.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tiledb
import yaml

import reference
from mounting import snapshot_tree, assert_unchanged


def sh(*cmd, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, timeout=120, check=check)


def test_tree_and_tile_bytes_through_the_mount(sample_arrays, mount):
    built = sample_arrays["filter_chain"]
    before = snapshot_tree(built.path)
    mnt = mount(built.path)
    top = sorted(os.listdir(mnt))
    for name in ("README.txt", "array.yaml", "schema", "metadata", "commits", "fragment_meta", "fragments"):
        assert name in top
    (name,) = reference.list_fragments(built.path)
    frag = mnt / "fragments" / name
    assert sorted(os.listdir(frag)) == sorted(
        ["fragment.yaml", "footer.yaml", "rtree", "stats.csv", "tiles.csv", "attrs", "dims", "fields", "cells",
         "cells.csv", "raw", "layout.csv", "layout", "hex"])
    # The int32 attribute a0: cat of every tile, concatenated, equals TileDB's read.
    cells = reference.fragment_cells(built.path, name)
    info = reference.fragment_info(built.path, name)
    tiles = [frag / "attrs" / "a0" / f"tile_{k}.bin" for k in range(info.tile_num)]
    got = sh("cat", *map(str, tiles)).stdout
    assert got == cells["a0"].fixed_bytes()
    # The var string attribute: values through cat.
    var = sh("cat", *[str(frag / "attrs" / "a1" / f"tile_{k}.var.bin") for k in range(info.tile_num)]).stdout
    assert var == cells["a1"].data
    # tile_K.txt is one JSON value per line.
    lines = sh("cat", str(frag / "attrs" / "a0" / "tile_0.txt")).stdout.decode().splitlines()
    assert [int(x) for x in lines] == cells["a0"].values[: info.tile_cell_counts[0]].tolist()
    # footer.yaml through grep and yaml.
    assert sh("grep", "-c", "^version: 22$", str(frag / "footer.yaml")).stdout.strip() == b"1"
    footer = yaml.safe_load((frag / "footer.yaml").read_bytes())
    assert footer["sparse_tile_num"] == info.tile_num
    # raw/ is the fragment's files byte for byte.
    for f in os.listdir(frag / "raw"):
        assert (frag / "raw" / f).read_bytes() == (built.path / "__fragments" / name / f).read_bytes()
    # The checksums of the chain are verified and reported per tile.
    record = yaml.safe_load((frag / "attrs" / "a0" / "tile_0.yaml").read_bytes())
    assert record["streams"]["data"]["checksums"] == "ok"
    assert record["streams"]["data"]["filters"] == ["BYTESHUFFLE", "ZSTD", "CHECKSUM_SHA256"]
    assert_unchanged(before, snapshot_tree(built.path))


def test_stat_sizes_are_exact_for_every_file(sample_arrays, mount):
    built = sample_arrays["all_dtypes_sparse"]
    # without the background check: array.yaml shows its progress, and may grow between the stat and the read
    mnt = mount(built.path, extra_args=["-o", "check=off"])
    files = sh("find", str(mnt), "-type", "f").stdout.decode().split("\n")
    files = [f for f in files if f]
    assert len(files) > 50
    sizes = sh("stat", "-c", "%s %n", *files).stdout.decode().splitlines()
    for line in sizes:
        size, path = line.split(" ", 1)
        assert int(size) == len(Path(path).read_bytes()), path
    assert sh("wc", "-c", str(mnt / "README.txt")).stdout.split()[0] == str(os.path.getsize(mnt / "README.txt")).encode()


def test_cp_of_a_fragment_folder_copies_exact_bytes(sample_arrays, mount, tmp_path):
    built = sample_arrays["sparse_2d"]
    mnt = mount(built.path)
    name = reference.list_fragments(built.path)[0]
    sh("cp", "-r", str(mnt / "fragments" / name), str(tmp_path / "copy"))
    for dirpath, _, files in os.walk(tmp_path / "copy"):
        for f in files:
            copied = Path(dirpath) / f
            rel = copied.relative_to(tmp_path / "copy")
            assert copied.read_bytes() == (mnt / "fragments" / name / rel).read_bytes()
    assert (tmp_path / "copy" / "raw" / "__fragment_metadata.tdb").read_bytes() == \
        (built.path / "__fragments" / name / "__fragment_metadata.tdb").read_bytes()


@pytest.mark.parametrize("cmd", [
    ["touch", "{m}/new"], ["mkdir", "{m}/dir"], ["rm", "{m}/README.txt"],
    ["sh", "-c", "echo x > {m}/array.yaml"], ["mv", "{m}/README.txt", "{m}/R"],
])
def test_writes_are_refused_and_array_untouched(sample_arrays, mount, cmd):
    built = sample_arrays["sparse_1d"]
    before = snapshot_tree(built.path)
    mnt = mount(built.path)
    res = subprocess.run([c.format(m=mnt) for c in cmd], capture_output=True, timeout=30)
    assert res.returncode != 0
    assert b"Read-only file system" in res.stderr
    assert (mnt / "README.txt").exists()
    assert_unchanged(before, snapshot_tree(built.path))


def test_python_open_for_write_is_erofs(sample_arrays, mount):
    mnt = mount(sample_arrays["sparse_1d"].path)
    with pytest.raises(OSError) as exc:
        open(mnt / "README.txt", "r+b")
    assert exc.value.errno == errno.EROFS


def test_fragments_appear_and_vanish_while_mounted(tmp_path, mount):
    uri = tmp_path / "live"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int32))
    tiledb.Array.create(str(uri), tiledb.ArraySchema(domain=dom, sparse=True,
                                                     attrs=[tiledb.Attr("a", dtype=np.int64)]))
    with tiledb.open(str(uri), "w", timestamp=1) as A:
        A[np.array([1, 2], np.int32)] = np.array([10, 20], np.int64)
    mnt = mount(uri)
    assert len(os.listdir(mnt / "fragments")) == 1
    with tiledb.open(str(uri), "w", timestamp=2) as A:
        A[np.array([3], np.int32)] = np.array([30], np.int64)
    names = sorted(os.listdir(mnt / "fragments"))
    assert len(names) == 2 and names[1].startswith("__2_2_")
    assert (mnt / "fragments" / names[1] / "attrs" / "a0" / "tile_0.txt").read_text() == "30\n"
    tiledb.consolidate(str(uri))
    tiledb.vacuum(str(uri))
    names = sorted(os.listdir(mnt / "fragments"))
    assert len(names) == 1 and names[0].startswith("__1_2_")
    assert (mnt / "fragments" / names[0] / "attrs" / "a0" / "tile_0.txt").read_text() == "10\n20\n30\n"


def test_a_corrupt_tile_is_eio_and_the_rest_still_reads(tmp_path, mount):
    uri = tmp_path / "dd"
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("plain", dtype=np.int64, filters=[tiledb.ZstdFilter()]),
        tiledb.Attr("dd", dtype=np.int64, filters=[tiledb.DoubleDeltaFilter()])])
    tiledb.Array.create(str(uri), schema)
    with tiledb.open(str(uri), "w", timestamp=1) as A:
        A[np.arange(4, dtype=np.int32)] = {"plain": np.arange(4), "dd": np.arange(4) * 3}
    (name,) = reference.list_fragments(uri)
    a1 = uri / "__fragments" / name / "a1.tdb"
    raw = bytearray(a1.read_bytes())
    raw[8:12] = (0xFFFFFFF0).to_bytes(4, "little")  # chunk 0's unfiltered length, far too big
    a1.write_bytes(bytes(raw))
    mnt = mount(uri)
    frag = mnt / "fragments" / name
    res = subprocess.run(["cat", str(frag / "attrs" / "a1" / "tile_0.bin")], capture_output=True, timeout=30)
    assert res.returncode != 0 and b"Input/output error" in res.stderr
    assert (frag / "attrs" / "a0" / "tile_0.txt").read_text() == "0\n1\n2\n3\n"
    problems = yaml.safe_load((frag / "fragment.yaml").read_bytes())["problems"]
    assert any(p["file"].endswith("a1.tdb") and "4294967280" in p["message"]
               for p in problems), problems
    summary = yaml.safe_load((mnt / "array.yaml").read_bytes())
    assert any(p["file"].endswith("a1.tdb") for p in summary["problems"])
    # The daemon still serves.
    assert (mnt / "README.txt").read_bytes().startswith(b"tdbfs")


def test_cli_reports_a_corrupt_footer_in_one_line(sample_arrays, tmp_path):
    import shutil
    import sys
    src = sample_arrays["sparse_2d"].path
    copy = tmp_path / "broken"
    shutil.copytree(src, copy)
    names = reference.list_fragments(copy)
    bad, good = names[0], names[-1]
    meta = copy / "__fragments" / bad / "__fragment_metadata.tdb"
    size = meta.stat().st_size
    meta.write_bytes(b"\xff" * size)  # every length field huge
    res = subprocess.run([sys.executable, "-m", "tdbfs", "cat", str(copy), f"fragments/{bad}/footer.yaml"],
                         capture_output=True, timeout=60)
    assert res.returncode == 1
    lines = res.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdbfs: error:")
    assert "__fragment_metadata.tdb" in lines[0] and f"byte {size - 8}" in lines[0]
    ok = subprocess.run([sys.executable, "-m", "tdbfs", "cat", str(copy), f"fragments/{good}/footer.yaml"],
                        capture_output=True, timeout=60)
    assert ok.returncode == 0 and b"version: 22" in ok.stdout
