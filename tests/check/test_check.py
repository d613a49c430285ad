"""`tdbfs check` on real arrays: clean ones are clean, each kind of damage and inconsistency is
reported with file and offset, the CLI prints lines/JSON with its exit codes, and nothing is written."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from tdbfs.check.check import ERROR, check_array
from tdbfs.store import ArrayStore
from tdbfs.store.fragment import DATA

CLI = [sys.executable, "-m", "tdbfs", "check"]


def _check(path):
    return check_array(ArrayStore(str(path)))


@pytest.mark.parametrize("kind, options", [
    ("sparse", {}), ("dense", {}), ("var_strings", {}), ("enumerations", {}), ("metadata", {}),
    ("fragment_meta", {}), ("commits", {}), ("filters", {"filter": "CHECKSUM_SHA256"}),
    ("consolidated", {"vacuum_after": True}),
])
def test_arrays_tiledb_writes_are_clean(array_factory, snapshot, kind, options):
    built = array_factory(kind, **options)
    before = snapshot(built.path)
    result = _check(built.path)
    assert result.clean and not result.problems, [p.line() for p in result.problems]
    assert result.counts["fragments"] == len(built.fragments())
    assert result.counts["tiles"] > 0 and result.counts["generic_tiles"] > result.counts["fragments"]
    assert snapshot(built.path) == before          # never writes to the array


@pytest.mark.parametrize("kind, options", [
    ("consolidated", {}),                                               # fragments, no vacuum
    ("consolidated", {"sparse": False}),
    ("consolidated", {"fragment_meta": True}),                         # footers too, no vacuum
    ("fragment_meta", {}),                                              # footers only, no vacuum
    ("commits", {"then_fragments": False}),                             # commits, no vacuum
    ("metadata", {"consolidate_meta": True}),                           # array metadata, no vacuum
    ("deletes", {}),                                                    # deletes consolidated, no vacuum
])
def test_consolidated_not_vacuumed_is_a_hint_not_a_problem(array_factory, kind, options):
    """Consolidation without vacuum is a state TileDB means to leave (readers skip what a vacuum file
    lists): array.yaml and every fragment.yaml show `problems: []`, `tdbfs check` exits 0 with no warning
    line, and the `not_vacuumed` hint counts the fragments a vacuum would remove."""
    import yaml
    from tdbfs.views.nodes import resolve
    from tdbfs.views.tree import build_root
    built = array_factory(kind, **options)
    result = _check(built.path)
    assert result.clean and result.problems == [], [p.line() for p in result.problems]
    root = build_root(ArrayStore(str(built.path)))

    def doc(path):
        node = resolve(root, path)
        return yaml.safe_load(node.read(0, node.size()))

    summary = doc("array.yaml")
    assert summary["problems"] == []
    for name in resolve(root, "fragments").children():
        assert doc(f"fragments/{name}/fragment.yaml")["problems"] == [], name
    (hint,) = [h for h in summary["hints"] if h["hint"] == "not_vacuumed"]
    listed = sum(1 for line in (p.read_text() for p in built.path.glob("__commits/*.vac")) for _ in line.split())
    assert hint["fragments"] == listed
    if kind == "consolidated" and not options:
        assert listed == 3
        res = subprocess.run(CLI + [str(built.path)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and "warning" not in res.stdout + res.stderr and "clean" in res.stdout


def test_checksum_failure_is_a_problem_and_the_bytes_stay_readable(array_factory):
    built = array_factory("filters", filter="CHECKSUM_MD5")
    store = ArrayStore(str(built.path))
    frag = store.fragments()[0]
    a0 = frag.field_by_stem("a0")
    loc = frag.location(a0, 0, DATA)
    # §2.2 chunk: u64 nchunks, u32 x3 header, then the MD5 filter's metadata; flip the last data byte.
    at = loc.offset + loc.persisted_size - 1
    with open(os.path.join(store.path, loc.file), "r+b") as f:
        f.seek(at)
        b = f.read(1)[0]
        f.seek(at)
        f.write(bytes([b ^ 1]))
    result = _check(built.path)
    bad = [p for p in result.errors if p.file == loc.file and p.structure == "tile 0" and "MD5" in p.message.upper()]
    assert bad and bad[0].offset == loc.offset and "computed" in bad[0].message
    tile = ArrayStore(str(built.path)).fragments()[0].tile(a0, 0, DATA)     # still decoded
    assert tile.checksum_failures and len(tile.data) == loc.unfiltered_size


def test_uncommitted_fragment_and_commit_without_fragment(array_factory):
    built = array_factory("sparse")
    root = built.path
    names = built.fragments()
    os.remove(root / "__commits" / f"{names[0]}.wrt")
    shutil.rmtree(root / "__fragments" / names[1])
    result = _check(root)
    assert not result.clean
    lines = [p.line() for p in result.errors]
    assert any(l.startswith(f"__fragments/{names[0]}:-: fragment: no commit") for l in lines), lines
    assert any(l.startswith(f"__commits/{names[1]}.wrt:-: commit file: commits fragment") for l in lines), lines


def test_footer_file_size_disagrees_with_file(array_factory):
    built = array_factory("sparse")
    frag = ArrayStore(str(built.path)).fragments()[0]
    rel = f"{frag.rel}/a0.tdb"
    size = os.path.getsize(built.path / rel)
    with open(built.path / rel, "ab") as f:
        f.write(b"\0" * 5)
    result = _check(built.path)
    hit = [p for p in result.errors if p.file == rel and p.structure == "data file"]
    assert hit and hit[0].offset == size and f"{size} bytes, the file has {size + 5}" in hit[0].message


def _plain_generic_tile(payload: bytes, version: int) -> bytes:
    """A generic tile (§2.1) without filters: 34-byte header, an empty pipeline (u32 max_chunk_size,
    u32 filter count 0), one chunk (§2.2) whose filtered bytes are the payload."""
    pipeline = struct.pack("<II", 65536, 0)
    tile = struct.pack("<Q", 1) + struct.pack("<III", len(payload), len(payload), 0) + payload
    header = struct.pack("<IQQBQBI", version, len(tile), len(payload), 4, 1, 0, len(pipeline))
    return header + pipeline + tile


def test_consolidated_fragment_metadata_disagreeing_with_the_footer(array_factory):
    built = array_factory("fragment_meta")
    store = ArrayStore(str(built.path))
    rel = store.fragment_meta_files()[0]
    gt = store.generic_tile(rel, 0, "consolidated fragment metadata")
    from tdbfs.format.consolidated_fragment_metadata import parse_consolidated_fragment_metadata
    entry = parse_consolidated_fragment_metadata(gt.payload, rel)[1]
    payload = bytearray(gt.payload)
    at = entry.footer_offset + entry.footer_length - 9      # a byte of the footer's last u64 offset
    payload[at] ^= 0x10
    with open(built.path / rel, "wb") as f:
        f.write(_plain_generic_tile(bytes(payload), gt.header.version))
    result = _check(built.path)
    hit = [p for p in result.errors if p.file == rel]
    assert len(hit) == 1 and hit[0].offset == at and entry.fragment_name in hit[0].message
    assert hit[0].within == "consolidated fragment metadata payload"


def test_cli_lines_json_quiet_and_exit_codes(array_factory, tmp_path):
    built = array_factory("sparse")
    res = subprocess.run(CLI + [str(built.path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip().endswith("checked)") and "clean" in res.stdout
    assert res.stderr == ""
    frag = ArrayStore(str(built.path)).fragments()[0]
    md = f"{frag.rel}/__fragment_metadata.tdb"
    with open(built.path / md, "r+b") as f:
        f.truncate(40)
    res = subprocess.run(CLI + [str(built.path)], capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    assert res.returncode == 1 and lines[0].startswith(md + ":") and "problems" in lines[-1]
    res = subprocess.run(CLI + ["--quiet", str(built.path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and len(res.stdout.splitlines()) == 1
    res = subprocess.run(CLI + ["--json", str(built.path)], capture_output=True, text=True, timeout=60)
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["clean"] is False and doc["errors"] == len(
        [p for p in doc["problems"] if p["severity"] == ERROR]) >= 1
    assert {"file", "structure", "offset", "message", "severity"} <= set(doc["problems"][0])
    assert doc["problems"][0]["file"] == md
    res = subprocess.run(CLI + [str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "not found" in res.stderr
    res = subprocess.run(CLI + ["--bogus", str(built.path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    res = subprocess.run(CLI + ["--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "1  problems found" in res.stdout and "2  could not run" in res.stdout


def test_progress_bar_only_on_a_terminal(array_factory):
    """With stderr a pseudo-terminal the bar is drawn there; stdout keeps only the report."""
    from terminal import run_with_terminal_stderr
    built = array_factory("sparse")
    res, seen = run_with_terminal_stderr(CLI + [str(built.path)], timeout=60)
    assert res.returncode == 0 and b"[" in seen and b"#" in seen
    assert b"#" not in res.stdout and b"clean" in res.stdout


def test_legacy0x_array_decodes_every_tile(tmp_path):
    """0.x arrays: the check reads every view their store backs (every tile decoded)."""
    import legacy0x_arrays as Z
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")
    (tmp_path / "zero").mkdir()
    corpus = Z.load_corpus(tmp_path / "zero")
    from tdbfs.store.open_array import open_array
    path, _spec = corpus["arrays"]["sparse_gzip"]
    result = check_array(open_array(path))
    assert result.counts["files"] > 5
    assert result.clean, [p.line() for p in result.problems]


def test_lossy_filter_tiles_are_clean_and_swapped_ones_still_found(tmp_path):
    """TileDB records a tile's min/max before the filters run: FLOAT_SCALE's values come back within half
    a step (scale / 2) of them, which is no problem; a FLOAT_SCALE whose integers overflow their byte width
    gives no bound, so nothing is compared. Two tiles swapped are still found, outside that precision."""
    import numpy as np
    import tiledb
    path = str(tmp_path / "lossy")
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 999), tile=100, dtype=np.int32))
    attrs = [tiledb.Attr("a0", dtype=np.float64, filters=tiledb.FilterList([tiledb.FloatScaleFilter(0.01, 0.5, 4)])),
             tiledb.Attr("a1", dtype=np.float32,
                         filters=tiledb.FilterList([tiledb.FloatScaleFilter(0.25, -1.0, 2), tiledb.ZstdFilter()])),
             tiledb.Attr("a2", dtype=np.float64, filters=tiledb.FilterList([tiledb.FloatScaleFilter(0.001, 0.0, 1)]))]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=True, capacity=20))
    rng = np.random.default_rng(1)
    with tiledb.open(path, "w") as A:
        A[np.arange(100, dtype=np.int32)] = {"a0": rng.uniform(-48, 49.6, 100),
                                             "a1": rng.uniform(-100, 100, 100).astype(np.float32),
                                             "a2": rng.uniform(-48, 49.6, 100)}
    result = _check(path)
    assert result.clean and result.problems == [], [p.line() for p in result.problems]
    assert result.counts["tiles"] == 20      # 5 tiles of d0, a0, a1 and a2
    frag = ArrayStore(path).fragments()[0]
    a0 = frag.field_by_stem("a0")
    t0, t1 = frag.location(a0, 0, DATA), frag.location(a0, 1, DATA)
    assert t0.persisted_size == t1.persisted_size
    with open(os.path.join(path, t0.file), "r+b") as f:
        first = f.read(t0.persisted_size)
        f.seek(t1.offset)
        second = f.read(t1.persisted_size)
        f.seek(t0.offset)
        f.write(second + first)
    result = _check(path)
    bad = sorted((p.structure, p.offset) for p in result.errors if p.file == t0.file and "values span" in p.message)
    assert bad == [("tile 0", t0.offset), ("tile 1", t1.offset)], [p.line() for p in result.problems]
    assert all("lossy filter" in p.message for p in result.errors)
