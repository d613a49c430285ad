"""A wrong number in a fragment's metadata is reported at that number, and bounds what it drives.

Real arrays written by tiledb-py, one number damaged in a copy each time, the field's offset taken
from the byte map of the undamaged file (what `layout/` shows):
- a footer file size that disagrees with its data file, where the data file's tiles end where the
  file ends: the problem is at the footer field, naming the data file, and reading the last tile
  gives that same problem, not one of its own on the data file;
- a footer generic tile offset beyond the generic tiles: at the footer field;
- a garbled sparse_tile_num or last_tile_cell_num: at the field, before any loop over the tiles;
- a dense fragment's tile_offsets generic tile with a garbled chunk count: a problem at the count, and
  the field's folder lists what survives (info.yaml), through the mount as in the library.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest
import yaml

import arrays
from tdbfs.check.check import check_array
from tdbfs.format.generic_tile import read_generic_tile_header
from tdbfs.store import ArrayStore
from tdbfs.store.byte_map import file_map
from tdbfs.store.fragment import DATA
from tdbfs.views.nodes import ViewError, resolve
from tdbfs.views.tree import build_root

MD = "__fragment_metadata.tdb"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    base = tmp_path_factory.mktemp("footer_numbers")
    return {"sparse": arrays.make_array(base, "sparse", ndim=1, n_fragments=1, cells=10).path,
            "dense": arrays.make_array(base, "dense", ndim=1).path}


def _copy(pristine, kind: str, tmp_path):
    dst = tmp_path / kind
    shutil.copytree(pristine[kind], dst, symlinks=True)
    frag = ArrayStore(str(dst)).fragments()[0]
    return dst, frag


def _field_at(frag, structure: str) -> int:
    """Where the undamaged metadata file holds the footer field `structure` (its byte map row)."""
    (start,) = [r.start for r in file_map(frag, MD).ranges if r.structure == f"footer: {structure}"]
    return start


def _poke(path, rel: str, at: int, data: bytes) -> None:
    with open(os.path.join(path, rel), "r+b") as f:
        f.seek(at)
        f.write(data)


def _read(root, path: str) -> bytes:
    node = resolve(root, path)
    return node.read(0, node.size())


def _problems(root, path: str) -> list[dict]:
    return yaml.safe_load(_read(root, path))["problems"]


def test_footer_file_size_is_reported_at_the_footer_field(pristine, tmp_path):
    path, frag = _copy(pristine, "sparse", tmp_path)
    md = f"{frag.rel}/{MD}"
    at = _field_at(frag, "file_sizes[0]")
    a0 = frag.field_by_stem("a0")
    last = frag.tile_count(a0.idx) - 1
    _poke(path, md, at, struct.pack("<Q", 2**62))
    result = check_array(ArrayStore(str(path)))
    assert [(p.file, p.structure, p.offset) for p in result.problems] == [(md, "fragment metadata footer", at)]
    (p,) = result.problems
    assert "file_sizes[0]" in p.message and "a0.tdb" in p.message and str(2**62) in p.message
    root = build_root(ArrayStore(str(path)))
    base = f"fragments/{frag.name}"
    with pytest.raises(ViewError):
        _read(root, f"{base}/attrs/a0/tile_{last}.bin")
    assert _read(root, f"{base}/attrs/a0/tile_0.bin")          # the tiles before it stay readable
    for view in (f"{base}/fragment.yaml", "array.yaml"):
        assert [(q["file"], q["offset"]) for q in _problems(root, view)] == [(md, at)], view


def test_a_truncated_data_file_is_still_the_data_files_problem(pristine, tmp_path):
    """The control: the footer is right, the file lost bytes: the problem is the data file's."""
    path, frag = _copy(pristine, "sparse", tmp_path)
    rel = f"{frag.rel}/a0.tdb"
    size = os.path.getsize(path / rel)
    os.truncate(path / rel, size - 5)
    files = {p.file for p in check_array(ArrayStore(str(path))).problems}
    assert rel in files and f"{frag.rel}/{MD}" not in files


def test_generic_tile_offset_past_the_generic_tiles_is_reported_at_the_footer_field(pristine, tmp_path):
    path, frag = _copy(pristine, "sparse", tmp_path)
    md = f"{frag.rel}/{MD}"
    at = _field_at(frag, "tile_offsets[1]")
    _poke(path, md, at, struct.pack("<Q", 2**62 + 5))
    result = check_array(ArrayStore(str(path)))
    hit = [p for p in result.problems if p.file == md and p.offset == at]
    assert hit and "tile_offsets[1]" in hit[0].message and "footer" in hit[0].message
    assert not [p for p in result.problems if p.offset == os.path.getsize(path / md)], \
        [p.line() for p in result.problems]


@pytest.mark.parametrize("field, value, words", [
    ("sparse_tile_num", 2**48, "more tiles than the data files hold"),
    ("last_tile_cell_num", 2**40, "more cells than a tile of capacity"),
])
def test_garbled_tile_counts_are_refused_at_the_field(pristine, tmp_path, field, value, words):
    """A count read from the footer is checked against what the files can hold before it drives a loop
    over the tiles: `tdbfs check` returns at once with the problem at the field."""
    path, frag = _copy(pristine, "sparse", tmp_path)
    md = f"{frag.rel}/{MD}"
    at = _field_at(frag, field)
    _poke(path, md, at, struct.pack("<Q", value))
    res = subprocess.run([sys.executable, "-m", "tdbfs", "check", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1
    assert f"{md}:{at}: fragment metadata footer: {field} {value} " in res.stdout and words in res.stdout, res.stdout
    root = build_root(ArrayStore(str(path)))
    assert sorted(resolve(root, f"fragments/{frag.name}/attrs/a0").children()) == ["info.yaml"]   # what survives
    assert (md, at) in [(p["file"], p["offset"]) for p in _problems(root, "array.yaml")]


def test_damaged_tile_offsets_list_what_survives(pristine, tmp_path, mount):
    """A dense fragment's tile count is the length of its tile offsets: with their generic tile's chunk count
    garbled, attrs/a0 lists info.yaml (tile_count null), the problem is at that count, and the mount's log
    has no internal error."""
    path, frag = _copy(pristine, "dense", tmp_path)
    md = f"{frag.rel}/{MD}"
    data = (path / md).read_bytes()
    header = read_generic_tile_header(data, frag.footer().generic_tile_offsets.tile_offsets[0], md, "tile_offsets")
    count_at = header.payload_offset            # the filtered tile's u64 chunk count (docs/format.md §2.2)
    _poke(path, md, count_at, struct.pack("<Q", 2**40))
    root = build_root(ArrayStore(str(path)))
    base = f"fragments/{frag.name}"
    assert sorted(resolve(root, f"{base}/attrs/a0").children()) == ["info.yaml"]
    assert yaml.safe_load(_read(root, f"{base}/attrs/a0/info.yaml"))["tile_count"] is None
    want = (md, count_at)
    assert want in [(p["file"], p["offset"]) for p in _problems(root, f"{base}/fragment.yaml")]
    assert want in [(p["file"], p["offset"]) for p in _problems(root, "array.yaml")]
    assert want in [(p.file, p.offset) for p in check_array(ArrayStore(str(path))).problems]
    log = tmp_path / "daemon.log"
    mnt = mount(path, extra_args=["--log", str(log)])
    assert sorted(os.listdir(mnt / base / "attrs" / "a0")) == ["info.yaml"]
    assert "tile_0.bin" in os.listdir(mnt / base / "attrs" / "a1")        # its own tile offsets are whole
    assert yaml.safe_load((mnt / base / "attrs" / "a0" / "info.yaml").read_bytes())["tile_count"] is None
    doc = yaml.safe_load((mnt / base / "fragment.yaml").read_bytes())
    hit = [p for p in doc["problems"] if (p["file"], p["offset"]) == want]
    assert hit and "tile chunks: count 1099511627776" in hit[0]["message"]
    text = log.read_text() if log.exists() else ""
    assert "internal error" not in text, text


@pytest.mark.parametrize("field, at, fmt, value", [
    ("persisted_size", 4, "<Q", 2**62), ("tile_size", 12, "<Q", 2**62), ("filter_pipeline_size", 30, "<I", 100000),
])
def test_generic_tile_header_numbers_are_reported_where_they_are(pristine, tmp_path, field, at, fmt, value):
    """docs/format.md §2.1: a generic tile header's persisted_size, tile_size and filter_pipeline_size that
    the file cannot hold are reported at the field, in the metadata file."""
    path, frag = _copy(pristine, "sparse", tmp_path)
    md = f"{frag.rel}/{MD}"
    start = frag.footer().generic_tile_offsets.tile_offsets[1]
    _poke(path, md, start + at, struct.pack(fmt, value))
    problems = check_array(ArrayStore(str(path))).problems
    hit = [p for p in problems if p.file == md and p.offset == start + at]
    assert hit and field in hit[0].message and str(value) in hit[0].message, [p.line() for p in problems]
