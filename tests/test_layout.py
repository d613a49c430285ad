"""Byte maps (layout.csv, layout/<file>.csv) and hex views (hex/<name>.txt) of fragment files.

The maps of arrays written by tiledb-py are checked against facts found without
tdbfs: the files' sizes on disk, a walk of each data file done here with `struct`
(tiles follow each other from byte 0: u64 nchunks, then per chunk three u32 lengths,
metadata and data, docs/format.md §2.2), a walk of the generic tiles of
__fragment_metadata.tdb (34-byte header + pipeline + persisted_size, §2.1) up to the
footer that the trailing u64 footer_len locates (§5.3), and TileDB's tile counts.
Corrupt copies (garbage appended, truncated) check that unclaimed and undecodable
bytes are reported exactly where they are.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import corpus
import reference
from arrays import ENCRYPTION_KEY
from test_many_fragments import CountingStorage
from tdbfs.format.reversers.encryption import parse_key
from tdbfs.store import ArrayStore
from tdbfs.store import array_file_map, byte_map
from tdbfs.store.byte_map import ByteRange, cover
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

META = "__fragment_metadata.tdb"
FLAGGED = ("unclaimed", "overlap", "undecodable")
CASES = ["sparse_2d", "dense_2d", "all_dtypes_sparse", "all_dtypes_dense", "sparse_string_dim",
         "consolidated_sparse", "deletes", "filter_CHECKSUM_SHA256", "filter_chain", "sparse_3d_mixed"]


# -- independent walks of the files --------------------------------------------------------

def walk_tiles(data: bytes) -> list[tuple[int, int, list[int]]]:
    """(tile offset, nchunks, chunk header offsets) of tiles written back to back from byte 0."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        start, pos, chunks = pos, pos + 8, []
        for _ in range(n):
            _, filtered, md = struct.unpack_from("<III", data, pos)
            chunks.append(pos)
            pos += 12 + md + filtered
        out.append((start, n, chunks))
    assert pos == len(data)
    return out


def walk_generic_tiles(data: bytes, end: int) -> list[int]:
    """Offsets of the generic tiles written back to back from byte 0 up to `end`."""
    out, pos = [], 0
    while pos < end:
        persisted = struct.unpack_from("<Q", data, pos + 4)[0]
        fps = struct.unpack_from("<I", data, pos + 30)[0]
        out.append(pos)
        pos += 34 + fps + persisted
    assert pos == end
    return out


def read_node(root, path: str) -> bytes:
    node = resolve(root, path)
    data = node.read(0, node.size() + 1)
    assert len(data) == node.size()
    return data


def rows_of(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def assert_partition(rows, size: int) -> None:
    pos = 0
    for r in rows:
        s, e, n = int(r["start"]), int(r["end"]), int(r["length"])
        assert s == pos and e > s and n == e - s, r
        pos = e
    assert pos == size


def _fragments(built):
    store = ArrayStore(str(built.path))
    return store, build_root(store), [os.path.basename(f.rel) for f in store.fragments()]


def frag_dir(array: Path, frag: str) -> Path:
    """Where a fragment's folder is: __fragments/<name> (format >= 12) or <name>."""
    nested = Path(array) / "__fragments" / frag
    return nested if nested.is_dir() else Path(array) / frag


# -- maps of real arrays -----------------------------------------------------------------------

@pytest.mark.parametrize("name", CASES)
def test_maps_cover_every_byte_and_match_the_files(sample_array, name):
    built = sample_array(name)
    store, root, frags = _fragments(built)
    assert frags
    for frag in frags:
        folder = frag_dir(built.path, frag)
        combined = rows_of(read_node(root, f"fragments/{frag}/layout.csv"))
        files = sorted(os.listdir(folder))
        assert sorted(resolve(root, f"fragments/{frag}/layout").children()) == [f + ".csv" for f in files]
        assert sorted({r["file"] for r in combined}) == files
        info = reference.fragment_info(built.path, frag)
        for fname in files:
            data = (folder / fname).read_bytes()
            rows = rows_of(read_node(root, f"fragments/{frag}/layout/{fname}.csv"))
            assert rows == [{k: v for k, v in r.items() if k != "file"} for r in combined if r["file"] == fname]
            assert_partition(rows, len(data))
            assert not [r for r in rows if r["structure"] in FLAGGED], fname
            if fname == META:
                _check_metadata(rows, data, folder)
            else:
                _check_data_file(rows, data, info)


def _check_data_file(rows, data: bytes, info) -> None:
    tiles = walk_tiles(data)
    heads = [(int(r["start"]), r) for r in rows if r["structure"].endswith(": nchunks")]
    assert [s for s, _ in heads] == [t[0] for t in tiles]
    assert [int(r["detail"].split()[0]) for _, r in heads] == [t[1] for t in tiles]
    assert len(tiles) == info.tile_num
    chunk_rows = [int(r["start"]) for r in rows if r["structure"].endswith(" header")]
    assert chunk_rows == [c for t in tiles for c in t[2]]
    for k, (_, r) in enumerate(heads):
        assert r["structure"] == f"tile {k}: nchunks"
        assert f"{info.tile_cell_counts[k]} cells" in r["detail"] or "cells" not in r["detail"]


def _check_metadata(rows, data: bytes, folder: Path) -> None:
    footer_len = struct.unpack_from("<Q", data, len(data) - 8)[0]
    footer_start = len(data) - 8 - footer_len
    gtiles = walk_generic_tiles(data, footer_start)
    versions = [int(r["start"]) for r in rows if r["structure"].endswith(": header.version")]
    assert versions == gtiles
    assert rows[-1] == {"start": str(len(data) - 8), "end": str(len(data)), "length": "8",
                        "structure": "footer: footer_len", "detail": f"{footer_len} (footer starts at byte {footer_start})"}
    footer = [r for r in rows if r["structure"].startswith("footer: ")]
    assert int(footer[0]["start"]) == footer_start and footer[0]["structure"] == "footer: version"
    sizes = [int(r["detail"].split()[0]) for r in footer if r["structure"].startswith("footer: file_")]
    on_disk = [os.path.getsize(folder / f) for f in os.listdir(folder) if f != META]
    assert sorted(s for s in sizes if s) == sorted(s for s in on_disk if s)
    # every footer pointer to a generic tile lands on one the walk found
    pointers = [int(r["detail"].split()[0]) for r in footer
                if "[" in r["structure"] and not r["structure"].startswith("footer: file_")]
    assert pointers and set(pointers) <= set(gtiles)


def test_var_strings_with_embedded_offsets(array_factory):
    built = array_factory("var_strings")
    store, root, frags = _fragments(built)
    for frag in frags:
        info = reference.fragment_info(built.path, frag)
        for fname in sorted(os.listdir(frag_dir(built.path, frag))):
            data = (frag_dir(built.path, frag) / fname).read_bytes()
            rows = rows_of(read_node(root, f"fragments/{frag}/layout/{fname}.csv"))
            assert_partition(rows, len(data))
            assert not [r for r in rows if r["structure"] in FLAGGED]
            if fname != META:
                _check_data_file(rows, data, info)


def test_encrypted_array_with_key(array_factory):
    built = array_factory("encrypted")
    store = ArrayStore(str(built.path), key=parse_key(ENCRYPTION_KEY.encode(), "test"))
    for frag in store.fragments():
        for name in byte_map.fragment_file_names(frag):
            m = byte_map.file_map(frag, name)
            assert m.ranges[0].start == 0 and m.ranges[-1].end == m.size
            assert not [r for r in m.ranges if r.structure in FLAGGED]
            if name == META:
                assert any(r.structure == "rtree: header.encryption_type" and r.detail.endswith("AES_256_GCM")
                           for r in m.ranges)
            else:
                assert all("AES_256_GCM" in r.detail for r in m.ranges if r.structure.endswith(" data"))


# -- hex views -----------------------------------------------------------------------------------

def parse_hex(text: str) -> dict[int, int]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or len(line) <= 8:
            continue
        offset = int(line[:8], 16)
        cells = line[10:58].split()
        for i, c in enumerate(cells):
            out[offset + i] = int(c, 16)
        ascii_col = line[line.index("|") + 1:line.rindex("|")]
        assert len(ascii_col) == len(cells)
    return out


@pytest.mark.parametrize("name", ["sparse_2d", "all_dtypes_dense"])
def test_hex_views_show_the_file_bytes_of_every_generic_tile(sample_array, name):
    built = sample_array(name)
    store, root, frags = _fragments(built)
    frag = frags[0]
    data = (frag_dir(built.path, frag) / META).read_bytes()
    rows = rows_of(read_node(root, f"fragments/{frag}/layout/{META}.csv"))
    hexdir = resolve(root, f"fragments/{frag}/hex")
    names = sorted(hexdir.children())
    assert "footer.txt" in names and "rtree.txt" in names and "tile_offsets_0.txt" in names
    # one dump per generic tile (the walk's count) plus the footer
    assert len(names) == sum(1 for r in rows if r["structure"].endswith(": header.version")) + 1
    covered = set()
    for n in names:
        text = read_node(root, f"fragments/{frag}/hex/{n}").decode()
        shown = parse_hex(text)
        assert shown and all(data[o] == b for o, b in shown.items())
        first = min(shown)
        region = n[:-4]
        label = "footer: version" if region == "footer" else None
        starts = {int(r["start"]) for r in rows if r["structure"] == label
                  or (label is None and r["structure"].endswith(": header.version"))}
        assert first in starts
        assert not covered & set(shown)
        covered |= set(shown)
        annotated = [line for line in text.splitlines() if line.startswith("# @")]
        assert annotated and all(int(a[3:].split("-")[0]) in {int(r["start"]) for r in rows} for a in annotated)
    assert covered == set(range(len(data)))       # the dumps together are the whole file
    tile_offsets = read_node(root, f"fragments/{frag}/hex/tile_offsets_0.txt").decode()
    assert "# @" in tile_offsets and "header.persisted_size" in tile_offsets


# -- corrupt copies --------------------------------------------------------------------------------

def _copy(built, tmp_path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(built.path, dest)
    return dest


def _map(path: Path, frag: str, name: str):
    store = ArrayStore(str(path))
    f = next(x for x in store.fragments() if os.path.basename(x.rel) == frag)
    return byte_map.file_map(f, name)


def test_garbage_after_a_data_file_is_unclaimed_exactly(sample_array, tmp_path):
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    frag = reference.list_fragments(path)[0]
    target = frag_dir(path, frag) / "a0.tdb"
    before = _map(path, frag, "a0.tdb").ranges
    size = target.stat().st_size
    with open(target, "ab") as f:
        f.write(b"GARBAGE" * 5 + b"!")
    after = _map(path, frag, "a0.tdb").ranges
    assert after[:-1] == before
    last = after[-1]
    assert (last.start, last.end, last.structure) == (size, size + 36, "unclaimed")
    assert "after the last structure" in last.detail and f"is {size} bytes, it has {size + 36}" in last.detail
    assert [r for r in after if r.structure in FLAGGED] == [last]


def test_garbage_after_the_metadata_file_leaves_the_footer_undecodable(sample_array, tmp_path):
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    frag = reference.list_fragments(path)[0]
    target = frag_dir(path, frag) / META
    before = _map(path, frag, META)
    footer_start = next(r.start for r in before.ranges if r.structure == "footer: version")
    with open(target, "ab") as f:
        f.write(struct.pack("<Q", 1 << 40))
    after = _map(path, frag, META)
    bad = [r for r in after.ranges if r.structure in FLAGGED]
    assert len(bad) == 1 and (bad[0].start, bad[0].end) == (footer_start, before.size + 8)
    assert bad[0].structure == "undecodable" and "footer_len 1099511627776" in bad[0].detail
    # every generic tile before it is still mapped, field by field
    assert [(r.start, r.end) for r in after.ranges[:-1]] == \
        [(r.start, r.end) for r in before.ranges if r.end <= footer_start]


def test_a_map_and_a_metadata_check_stat_the_metadata_file_once_and_the_next_sees_a_change(sample_array, tmp_path):
    """Building the map of __fragment_metadata.tdb (and check's decode of its generic tiles) takes the
    file's version once, in one pass of the store, where each generic tile asked for it before (54 stats
    of this file for one map); a map asked for later, of the file as changed meanwhile, shows the change."""
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    name = reference.list_fragments(path)[0]
    storage = CountingStorage(str(path))
    store = ArrayStore(storage)
    frag = next(x for x in store.fragments() if os.path.basename(x.rel) == name)
    md = f"{frag.rel}/{META}"
    del storage.stated[:]
    before = byte_map.file_map(frag, META)
    data = (frag_dir(path, name) / META).read_bytes()
    footer_start = len(data) - 8 - struct.unpack_from("<Q", data, len(data) - 8)[0]
    tiles = [r.start for r in before.regions if r.name != "footer"]
    assert tiles == walk_generic_tiles(data, footer_start) and len(tiles) >= 5
    assert storage.stated.count(md) == 1

    fresh = ArrayStore(CountingStorage(str(path)))
    other = next(x for x in fresh.fragments() if os.path.basename(x.rel) == name)
    del fresh.storage.stated[:]
    assert other.decode_metadata() >= len(tiles)
    assert fresh.storage.stated.count(md) == 1 and not other.problems.items

    with open(frag_dir(path, name) / META, "ab") as f:
        f.write(struct.pack("<Q", 1 << 40))
    after = byte_map.file_map(frag, META)
    flagged = [r for r in after.ranges if r.structure in FLAGGED]
    assert after.size == before.size + 8 and after.ranges[:-1] == before.ranges
    assert [(r.start, r.end, r.structure) for r in flagged] == [(before.size, before.size + 8, "unclaimed")]


def test_truncated_data_file_is_undecodable_from_the_cut_chunk(sample_array, tmp_path):
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    frag = reference.list_fragments(path)[0]
    target = frag_dir(path, frag) / "a1_var.tdb"
    before = _map(path, frag, "a1_var.tdb")
    last_chunk = [r for r in before.ranges if r.structure.endswith(" header")][-1]
    os.truncate(target, before.size - 5)
    after = _map(path, frag, "a1_var.tdb")
    bad = [r for r in after.ranges if r.structure in FLAGGED]
    assert len(bad) == 1 and bad[0] is after.ranges[-1]
    assert (bad[0].start, bad[0].end) == (last_chunk.start, before.size - 5)
    # the reason names an offset inside the cut chunk's header (the lengths that overrun the file)
    at = int(re.search(r"at byte (\d+)", bad[0].detail).group(1))
    assert last_chunk.start <= at <= last_chunk.end and "chunk 0 metadata and data" in bad[0].detail
    assert f"footer's size of this file is {before.size} bytes, it has {before.size - 5}" in bad[0].detail
    assert [(r.start, r.end, r.structure) for r in after.ranges[:-1]] == \
        [(r.start, r.end, r.structure) for r in before.ranges if r.end <= last_chunk.start]
    assert f"(the file ends at {before.size - 5})" in after.ranges[-2].detail


def test_truncated_metadata_maps_the_tiles_before_the_cut(sample_array, tmp_path):
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    frag = reference.list_fragments(path)[0]
    target = frag_dir(path, frag) / META
    before = _map(path, frag, META)
    cut_tile = next(r for r in before.ranges if r.structure == "tile_offsets[1]: header.version")
    cut = cut_tile.start + 40      # inside the tile's filter pipeline / payload
    os.truncate(target, cut)
    after = _map(path, frag, META)
    bad = [r for r in after.ranges if r.structure in FLAGGED]
    assert len(bad) == 1 and (bad[0].start, bad[0].end) == (cut_tile.start, cut)
    assert f"no generic tile at byte {cut_tile.start}" in bad[0].detail
    assert [(r.start, r.end) for r in after.ranges[:-1]] == \
        [(r.start, r.end) for r in before.ranges if r.end <= cut_tile.start]
    assert after.ranges[0].structure == "generic tile at 0: header.version"


def test_cover_flags_gaps_overlaps_and_the_end():
    rows = cover([ByteRange(2, 10, "A"), ByteRange(6, 14, "B"), ByteRange(16, 18, "C")], 21)
    assert [(r.start, r.end, r.structure) for r in rows] == [
        (0, 2, "unclaimed"), (2, 6, "A"), (6, 10, "overlap"), (10, 14, "B"), (14, 16, "unclaimed"),
        (16, 18, "C"), (18, 21, "unclaimed")]
    assert rows[2].detail == "A and B"
    assert rows[4].detail == "gap between B and C"
    assert rows[-1].detail.startswith("after the last structure (C")
    assert [(r.start, r.end, r.structure) for r in cover([], 5)] == [(0, 5, "unclaimed")]
    nested = cover([ByteRange(0, 10, "A"), ByteRange(3, 5, "B")], 10)
    assert [(r.start, r.end, r.structure) for r in nested] == [(0, 3, "A"), (3, 5, "overlap"), (5, 10, "A")]


# -- legacy formats ------------------------------------------------------------------------------------

@pytest.mark.parametrize("folder,path", corpus.arrays() or [("none", "none")])
def test_corpus_maps_cover_every_byte(folder, path):
    corpus.require()
    store = ArrayStore(path)
    frags = store.fragments()
    for frag in frags:
        for name in byte_map.fragment_file_names(frag):
            m = byte_map.file_map(frag, name)
            assert m.ranges[0].start == 0 and m.ranges[-1].end == m.size == os.path.getsize(os.path.join(store.path, frag._file(name)))
            assert all(a.end == b.start for a, b in zip(m.ranges, m.ranges[1:]))
            flagged = [r for r in m.ranges if r.structure in FLAGGED]
            if folder in corpus.REFUSED:
                continue
            assert not flagged, (name, flagged[:3])
            if name != META:
                data = Path(os.path.join(store.path, frag._file(name))).read_bytes()
                tiles = walk_tiles(data)
                assert [r.start for r in m.ranges if r.structure.endswith(": nchunks")] == [t[0] for t in tiles]
            elif frag.footer().version <= 2:
                assert m.ranges[0].structure == "legacy fragment metadata: header.version"
                assert [g.name for g in m.regions] == ["legacy_fragment_metadata"]


# -- FUSE ---------------------------------------------------------------------------------------------

def test_layout_through_a_mount(sample_array, mount, tmp_path):
    built = sample_array("sparse_2d")
    path = _copy(built, tmp_path)
    mnt = mount(path)
    frag = reference.list_fragments(path)[0]
    d = mnt / "fragments" / frag
    text = subprocess.run(["cat", str(d / "layout.csv")], capture_output=True, text=True, check=True).stdout
    assert len(text.encode()) == os.stat(d / "layout.csv").st_size
    assert text.startswith("file,start,end,length,structure,detail\n")
    grep = subprocess.run(["grep", "-c", "^a0.tdb,.*,tile [0-9]*: nchunks,", str(d / "layout.csv")],
                          capture_output=True, text=True)
    assert int(grep.stdout) == reference.fragment_info(path, frag).tile_num
    grep = subprocess.run(["grep", ",unclaimed,", str(d / "layout" / "a0.tdb.csv")], capture_output=True, text=True)
    assert grep.returncode == 1 and grep.stdout == ""
    first = subprocess.run(["head", "-2", str(d / "layout" / "a0.tdb.csv")], capture_output=True, text=True).stdout
    assert first.splitlines()[1].startswith("0,8,8,tile 0: nchunks,")
    hexdump = (d / "hex" / "footer.txt").read_text()
    data = (frag_dir(path, frag) / META).read_bytes()
    assert all(data[o] == b for o, b in parse_hex(hexdump).items())


# -- array-level files: schemas, enumerations, commits, metadata, .meta ---------------------------------

from tdbfs.views.layout_views import array_file_dirs  # noqa: E402

#: the folders the tree shows array-level files in, by the store listing that feeds each
ARRAY_FILE_LISTS = ("schema_files", "enumeration_files", "commit_files", "metadata_files", "fragment_meta_files")
TEXT_EXT = {".vac": "vacuum entry", ".ign": "ignore entry"}
TILE_EXT = (".del", ".upd", ".meta")


def _ext(rel: str) -> str:
    base = os.path.basename(rel)
    return "." + base.rsplit(".", 1)[1] if "." in base else ""


def _is_generic(rel: str) -> bool:
    return _ext(rel) in TILE_EXT or rel == "__array_schema.tdb" or \
        (_ext(rel) == "" and rel.startswith(("__schema/", "__meta/")))


def _array_files(store, listing: str):
    files = getattr(store, listing)
    return files, array_file_dirs(store, files)


def _check_generic_tile_rows(rows, data: bytes, rel: str) -> None:
    """The header fields where §2.1 puts them, read here with struct, and the tile ending the file."""
    version, persisted, tile_size = struct.unpack_from("<IQQ", data, 0)
    fps = struct.unpack_from("<I", data, 30)[0]
    fields = {r["structure"].rsplit(": ", 1)[-1]: r for r in rows if ": header." in r["structure"]}
    want = {"header.version": (0, 4, version), "header.persisted_size": (4, 12, persisted),
            "header.tile_size": (12, 20, tile_size), "header.filter_pipeline_size": (30, 34, fps)}
    for field, (s, e, value) in want.items():
        r = fields[field]
        assert (int(r["start"]), int(r["end"])) == (s, e), (rel, r)
        assert r["detail"] == f"{field.split('.')[1]} = {value}", (rel, r)
    assert (int(fields["header.datatype"]["start"]), int(fields["header.encryption_type"]["start"])) == (20, 29)
    if fps:
        assert (int(fields["header.filter_pipeline"]["start"]), int(fields["header.filter_pipeline"]["end"])) == \
            (34, 34 + fps)
    assert 34 + fps + persisted == len(data)
    nchunks = next(r for r in rows if r["structure"].endswith("payload: nchunks"))
    assert int(nchunks["start"]) == 34 + fps
    assert int(nchunks["detail"].split()[0]) == struct.unpack_from("<Q", data, 34 + fps)[0]


def _check_array_files(store, path: Path) -> set:
    """Every array-level file: its map partitions it, names its structures where the bytes are, and
    its hex dump is its bytes. Returns the kinds of files seen."""
    seen = set()
    for listing in ARRAY_FILE_LISTS:
        files, dirs = _array_files(store, listing)
        rels = files()
        assert sorted(dirs["layout"].children()) == sorted(os.path.basename(r) + ".csv" for r in rels)
        assert sorted(dirs["hex"].children()) == sorted(os.path.basename(r) + ".txt" for r in rels if _is_generic(r))
        for rel in rels:
            data = (path / rel).read_bytes()
            raw = read_node(dirs["layout"], os.path.basename(rel) + ".csv")
            assert raw.startswith(b"file,start,end,length,structure,detail\n")
            rows = rows_of(raw)
            assert all(r["file"] == rel for r in rows)
            assert_partition(rows, len(data))
            assert not [r for r in rows if r["structure"] in FLAGGED], (rel, rows)
            ext = _ext(rel)
            if _is_generic(rel):
                seen.add(ext or rel.split("/")[-2] if "/" in rel else rel)
                _check_generic_tile_rows(rows, data, rel)
                text = read_node(dirs["hex"], os.path.basename(rel) + ".txt").decode()
                shown = parse_hex(text)
                assert sorted(shown) == list(range(len(data))) and bytes(shown[i] for i in shown) == data
                starts = {int(r["start"]) for r in rows}
                annotated = [int(a[3:].split("-")[0]) for a in text.splitlines() if a.startswith("# @")]
                assert sorted(annotated) == sorted(starts)
            elif ext in TEXT_EXT:
                seen.add(ext)
                lines = [line for line in data.decode().split("\n") if line]
                assert [r["detail"] for r in rows if r["structure"] == TEXT_EXT[ext]] == lines
                assert {r["structure"] for r in rows} <= {TEXT_EXT[ext], "empty line"}
            elif ext == ".con":
                seen.add(ext)
                _check_con(rows, data)
            elif ext in (".wrt", ".ok"):
                seen.add(ext)
                assert data == b"" and rows == []
    return seen


def _check_con(rows, data: bytes) -> None:
    """Lines, and after each .del line its u64 size and the generic tile it embeds (§7.3)."""
    pos = 0
    by_start = {int(r["start"]): r for r in rows}
    while pos < len(data):
        end = data.index(b"\n", pos) + 1
        line = data[pos:end - 1].decode()
        assert by_start[pos]["structure"] == "commit entry" and by_start[pos]["detail"].startswith(line)
        pos = end
        if line.endswith(".del"):
            (n,) = struct.unpack_from("<Q", data, pos)
            assert by_start[pos]["structure"] == "embedded .del size" and by_start[pos]["detail"] == f"{n} bytes"
            tile = by_start[pos + 8]
            assert tile["structure"] == "embedded delete condition: header.version"
            assert tile["detail"] == f"version = {struct.unpack_from('<I', data, pos + 8)[0]}"
            assert "stored condition" in next(r["detail"] for r in rows if int(r["start"]) > pos + 8
                                              and r["structure"].endswith("payload: nchunks"))
            pos += 8 + n


@pytest.mark.parametrize("name", ["commits", "consolidated_sparse", "deletes", "enumerations", "metadata",
                                  "fragment_meta", "schema_evolution"])
def test_array_file_maps_cover_every_byte(sample_array, name):
    built = sample_array(name)
    seen = _check_array_files(ArrayStore(str(built.path)), Path(built.path))
    expected = {"commits": {".con", ".ign", ".del", ".wrt", "__schema"},
                "consolidated_sparse": {".vac", ".wrt"}, "deletes": {".del"},
                "enumerations": {"__enumerations"}, "metadata": {"__meta"}, "fragment_meta": {".meta"}}
    assert expected.get(name, {"__schema"}) <= seen


def test_array_file_maps_of_consolidated_metadata(array_factory):
    built = array_factory("metadata", consolidate_meta=True)
    assert {".vac", "__meta"} <= _check_array_files(ArrayStore(str(built.path)), Path(built.path))


def test_array_file_listing_decodes_nothing(sample_array, monkeypatch):
    built = sample_array("commits")
    store = ArrayStore(str(built.path))
    calls = []
    for method in ("read_file", "generic_tile", "pread"):
        real = getattr(store, method)
        monkeypatch.setattr(store, method, lambda *a, real=real, method=method: calls.append(method) or real(*a))
    dirs = array_file_dirs(store, store.commit_files)
    names = list(dirs["layout"].children()) + list(dirs["hex"].children())
    assert names and calls == []
    node = dirs["hex"].child(next(n for n in dirs["hex"].children()))
    assert node.size() > 0 and "read_file" in calls


def test_encrypted_array_files_show_their_aes_parts(array_factory):
    built = array_factory("encrypted")
    path = Path(built.path)
    for key in (None, parse_key(ENCRYPTION_KEY.encode(), "test")):
        store = ArrayStore(str(built.path), key=key)
        for listing in ("schema_files", "metadata_files"):
            files, dirs = _array_files(store, listing)
            for rel in files():
                data = (path / rel).read_bytes()
                rows = rows_of(read_node(dirs["layout"], os.path.basename(rel) + ".csv"))
                assert_partition(rows, len(data))
                assert not [r for r in rows if r["structure"] in FLAGGED]
                _check_generic_tile_rows(rows, data, rel)
                assert next(r for r in rows if r["structure"].endswith("header.encryption_type"))["detail"] == \
                    "encryption_type = AES_256_GCM"
                nchunks = next(r for r in rows if r["structure"].endswith("payload: nchunks"))
                assert ("not decoded" in nchunks["detail"]) == (key is None)
                counts = [r for r in rows if r["structure"].endswith("AES-256-GCM part counts")]
                assert counts
                for c in counts:
                    at = int(c["start"])
                    n_md, n_data = struct.unpack_from("<II", data, at)
                    assert c["detail"] == f"{n_md} metadata parts, {n_data} data parts"
                    heads = [r for r in rows if int(r["start"]) > at and r["structure"].endswith(" header")
                             and "AES-256-GCM" in r["structure"]][:n_md + n_data]
                    for i, h in enumerate(heads):
                        s = at + 8 + 36 * i
                        assert int(h["start"]) == s and int(h["end"]) == s + 36
                        plain, cipher = struct.unpack_from("<II", data, s)
                        assert h["detail"] == (f"plain_len {plain}, cipher_len {cipher}, iv {data[s + 8:s + 20].hex()}, "
                                               f"tag {data[s + 20:s + 36].hex()}")
                    parts = [r for r in rows if re.search(r"AES-256-GCM (metadata|data) part \d+$", r["structure"])]
                    assert sum(int(r["length"]) for r in parts) == sum(
                        struct.unpack_from("<I", data, at + 8 + 36 * i + 4)[0] for i in range(n_md + n_data))


def _single(rows_or_map):
    bad = [r for r in rows_or_map if r.structure in FLAGGED]
    assert len(bad) == 1, bad
    return bad[0]


def test_damaged_array_files(sample_array, tmp_path):
    built = sample_array("commits")
    path = _copy(built, tmp_path)
    store = ArrayStore(str(path))
    schema = store.schema_files()[0]
    dele = next(r for r in store.commit_files() if r.endswith(".del"))
    ign = next(r for r in store.commit_files() if r.endswith(".ign"))
    good = {rel: array_file_map.array_file_map(ArrayStore(str(built.path)), rel) for rel in (schema, dele, ign)}

    # schema: chunk 0 says it holds far more bytes than the tile has
    data = bytearray((path / schema).read_bytes())
    fps = struct.unpack_from("<I", data, 30)[0]
    chunk = 34 + fps + 8
    struct.pack_into("<I", data, chunk + 4, 0x7FFFFFFF)
    (path / schema).write_bytes(bytes(data))
    # .del: cut inside its payload, so persisted_size overruns the file
    cut = good[dele].size - 10
    os.truncate(path / dele, cut)
    # .ign: a line that is not UTF-8 between two good ones
    lines = (path / ign).read_bytes().split(b"\n")
    (path / ign).write_bytes(lines[0] + b"\n\xff\xfe bad\n" + b"\n".join(lines[1:]))

    store = ArrayStore(str(path))
    m = array_file_map.array_file_map(store, schema)
    bad = _single(m.ranges)
    assert (bad.start, bad.end) == (chunk, m.size)
    at = int(re.search(r"at byte (\d+)", bad.detail).group(1))
    assert chunk <= at < chunk + 12 and "array schema: payload" in bad.detail
    assert [(r.start, r.end, r.structure) for r in m.ranges if r.end <= chunk] == \
        [(r.start, r.end, r.structure) for r in good[schema].ranges if r.end <= chunk]
    assert "not decoded" in m.ranges[8].detail

    m = array_file_map.array_file_map(store, dele)
    bad = _single(m.ranges)
    # a header that does not decode keeps its fixed fields; the rest of the file is undecodable,
    # the reason naming persisted_size's offset
    assert (bad.start, bad.end, m.size) == (34, cut, cut) and "persisted_size" in bad.detail
    assert "at byte 4" in bad.detail
    assert [r.structure for r in m.ranges[:7]] == [f"delete condition: header.{f}" for f in (
        "version", "persisted_size", "tile_size", "datatype", "cell_size", "encryption_type",
        "filter_pipeline_size")]

    m = array_file_map.array_file_map(store, ign)
    bad = _single(m.ranges)
    assert (bad.start, bad.end) == (len(lines[0]) + 1, len(lines[0]) + 8)
    assert f"not valid UTF-8 at byte {len(lines[0]) + 1}" in bad.detail
    assert len([r for r in m.ranges if r.structure == "ignore entry"]) == len([x for x in lines if x])

    # garbage after a generic tile: unclaimed, the tile itself intact
    meta = tmp_path / "copy2"
    shutil.copytree(built.path, meta)
    with open(meta / schema, "ab") as f:
        f.write(b"JUNK" * 3)
    m = array_file_map.array_file_map(ArrayStore(str(meta)), schema)
    last = _single(m.ranges)
    assert (last.start, last.end, last.structure) == (good[schema].size, good[schema].size + 12, "unclaimed")
    assert list(m.ranges[:-1]) == list(good[schema].ranges)

    # the views still show every damaged file, byte for byte, with the flagged rows
    dirs = array_file_dirs(store, lambda: [schema, dele, ign])
    for rel in (schema, dele):
        text = read_node(dirs["hex"], os.path.basename(rel) + ".txt").decode()
        shown = parse_hex(text)
        assert bytes(shown[i] for i in sorted(shown)) == (path / rel).read_bytes()
        assert "undecodable" in text
    assert b",undecodable," in read_node(dirs["layout"], os.path.basename(ign) + ".csv")


@pytest.mark.parametrize("folder,path", corpus.arrays() or [("none", "none")])
def test_corpus_array_file_maps_cover_every_byte(folder, path):
    corpus.require()
    store = ArrayStore(path)
    for listing in ARRAY_FILE_LISTS:
        for rel in getattr(store, listing)():
            m = array_file_map.array_file_map(store, rel)
            assert m.size == os.path.getsize(os.path.join(path, rel))
            assert (m.ranges[0].start if m.ranges else 0) == 0 and (m.ranges[-1].end if m.ranges else 0) == m.size
            assert all(a.end == b.start for a, b in zip(m.ranges, m.ranges[1:]))
            if folder in corpus.REFUSED:
                continue
            assert not [r for r in m.ranges if r.structure in FLAGGED], (rel, m.ranges[:3])
            if rel == "__array_schema.tdb" and m.ranges:
                assert m.ranges[0].structure == "array schema: header.version"


def test_array_file_views_follow_a_file_rewritten_while_shown(sample_array, tmp_path):
    built = sample_array("commits")
    path = _copy(built, tmp_path)
    store = ArrayStore(str(path))
    dirs = array_file_dirs(store, store.commit_files)
    ign = next(r for r in store.commit_files() if r.endswith(".ign"))
    name = os.path.basename(ign) + ".csv"
    node = dirs["layout"].child(name)
    before = read_node(dirs["layout"], name)
    assert b",undecodable," not in before
    st = (path / ign).stat()
    data = (path / ign).read_bytes()
    (path / ign).write_bytes(b"\xff" + data[1:])       # same size: only the mtime tells
    os.utime(path / ign, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    after = rows_of(node.fresh())
    assert after[0]["structure"] == "undecodable" and after[0]["start"] == "0"
    assert rows_of(before)[1:] == after[1:]
