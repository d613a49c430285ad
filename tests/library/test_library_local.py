"""tdbfs.open on local arrays and a group, against tiledb-py (FragmentInfoList, its reads), the tree's
own files, a real mount read with cat, and `tdbfs check --json`."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

tiledb = pytest.importorskip("tiledb")

import arrays  # noqa: E402
import groups  # noqa: E402
import library_oracle as oracle  # noqa: E402
from mounting import mounted  # noqa: E402

import tdbfs  # noqa: E402

#: name -> (kind, options): dense and sparse, every datatype, var-sized and nullable fields, a filter
#: chain, string dimensions, and a consolidated array whose old fragments are still there
BUILT = {
    "dense_2d": ("dense", dict(ndim=2)),
    "sparse_2d": ("sparse", dict(ndim=2)),
    "sparse_string_dim": ("sparse", dict(ndim=2, dim_kinds=["string", "int"], cells=8, capacity=3)),
    "all_dtypes_sparse": ("all_dtypes", dict(sparse=True)),
    "all_dtypes_dense": ("all_dtypes", dict(sparse=False)),
    "filter_chain": ("filters", dict(filter="BYTESHUFFLE+ZSTD+CHECKSUM_SHA256")),
    "consolidated_sparse": ("consolidated", dict(sparse=True)),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("library_arrays")
    return {name: arrays.make_array(base, kind, name=name, **opts) for name, (kind, opts) in BUILT.items()}


@pytest.mark.parametrize("name", list(BUILT))
def test_fragments_tiles_and_cells_are_what_tiledb_and_the_tree_hold(built, name):
    path = str(built[name].path)
    with tdbfs.open(path) as array:
        assert isinstance(array, tdbfs.Array) and array.uri == path
        assert oracle.assert_fragments_match_tiledb(array, path) >= 1
        tiles = values = cells = 0
        for frag in array.fragments:
            tiles += oracle.assert_tiles_are_the_tree_files(array, frag)
            values += oracle.assert_tiles_are_tiledb_values(frag, path)
            cells += oracle.assert_cells_are_cells_csv(array, frag)
            assert frag.problems == []
        assert tiles and values and cells
        problems = array.problems   # what array.yaml lists: none an error (some warnings, issue 35)
        assert [p.to_dict() for p in problems] == yaml.safe_load(array.open_view("array.yaml"))["problems"]
        assert [p for p in problems if p.severity == "error"] == []


def test_tile_statistics_and_locations_are_tiles_csv(built):
    path = str(built["sparse_2d"].path)
    with tdbfs.open(path) as array:
        frag = array.fragments[0]
        rows = list(__import__("csv").DictReader(__import__("io").StringIO(
            array.open_view(f"fragments/{frag.name}/tiles.csv").decode())))
        field = frag.fields[0]
        infos = frag.tiles(field.name)
        assert len(infos) == len(rows) == frag.tile_count
        for info, row in zip(infos, rows):
            assert info.cells == int(row["cells"])
            assert info.data.offset == int(row[f"{field.stem}_offset"])
            assert info.data.persisted_size == int(row[f"{field.stem}_persisted_size"])
            assert info.data.unfiltered_size == len(array.open_view(
                f"fragments/{frag.name}/attrs/{field.stem}/tile_{info.index}.bin"))
            assert str(info.min) == row[f"{field.stem}_min"] and str(info.max) == row[f"{field.stem}_max"]
            tile = frag.tile(field.name, info.index)
            assert (tile.min(), tile.max()) == (info.min, info.max)


def test_tiles_read_through_a_real_mount_are_the_library_s(built):
    path = built["all_dtypes_sparse"].path
    with tdbfs.open(path) as array, mounted(path, extra_args=["-o", "check=off"]) as mnt:
        frag = array.fragments[0]
        for field in frag.fields:
            folder = "dims" if field.kind == "dimension" else "attrs"
            k = frag.tile_count - 1
            read = subprocess.run(["cat", str(mnt / "fragments" / frag.name / folder / field.stem / f"tile_{k}.bin")],
                                  capture_output=True, check=True).stdout
            tile = frag.tile(field.name, k)
            data = tile.offsets if field.var_sized else (tile.data if np.ma.isMaskedArray(tile) else tile)
            assert np.ascontiguousarray(data).tobytes() == read, field.name
        assert (mnt / "array.yaml").read_bytes() == array.open_view("array.yaml")
        assert sorted(p.name for p in (mnt / "fragments").iterdir()) == sorted(array.listdir("fragments"))


@pytest.mark.parametrize("name", ["sparse_2d", "consolidated_sparse"])
def test_check_is_tdbfs_check_json(built, name):
    path = str(built[name].path)
    with tdbfs.open(path) as array:
        result = array.check()
        assert oracle.check_document(result) == oracle.cli_check_json(path)
        assert result.clean and result.counts["tiles"] > 0
    with tdbfs.open(path) as array:   # worker processes: the same findings
        assert oracle.check_document(array.check(jobs=2)) == oracle.cli_check_json(path)


def test_schema_metadata_timeline_as_of_and_stats(tmp_path):
    built = arrays.make_array(tmp_path, "metadata")
    with tdbfs.open(built.path) as array, tiledb.open(str(built.path)) as A:
        # tiledb-py keeps a numpy array under `__np_flat_<key>`: the key as stored is what the library shows
        assert {k.removeprefix("__np_flat_"): v for k, v in array.metadata.items()} == {
            k: (v.tolist() if isinstance(v, np.ndarray) else list(v) if isinstance(v, tuple) else v)
            for k, v in A.meta.items()}
        schema = array.schema
        assert [d.name for d in schema.dimensions] == [d.name for d in A.schema.domain]
        assert [n + ".yaml" for n in array.schemas] == [n for n in array.listdir("schema")
                                                        if n.endswith(".yaml") and n != "current.yaml"]
        assert array.schema is array.schemas[array.listdir("schema") and
                                             array.tree.info("schema/current.yaml")["destination"][:-5]]
        timeline_csv = array.open_view("timeline.csv").decode().splitlines()
        assert len(array.timeline) == len(timeline_csv) - 1
        last = array.timeline[-1].time_ms
        moment = array.as_of(last)
        assert [f.name for f in moment.fragments] == [p.split(" -> ")[0] for p in moment.listdir("fragments")]
        reader = yaml.safe_load(moment.open_view("reader.yaml"))
        assert reader["fragments_read"] == [f.name for f in moment.fragments] and reader["timestamp"] == last
        assert moment.metadata == array.metadata and moment.schema is array.schema
        stats = array.stats
        assert set(stats) == set(array.fragments.names())
        for frag in array.fragments:
            assert sum(s.cell_count for s in stats[frag.name] if s.kind == "attribute") > 0


def test_group_members_open_to_their_own_arrays(tmp_path):
    built = groups.build_nested(tmp_path)
    with tdbfs.open(built.path) as group:
        assert isinstance(group, tdbfs.Group)
        listed = yaml.safe_load(group.open_view("group.yaml"))["members"]
        assert [(m.name, m.type, m.uri) for m in group.members] == [(m["name"], m["type"], m["uri"]) for m in listed]
        assert group.metadata["title"] == "top group, renamed"
        assert [p.to_dict() for p in group.problems] == yaml.safe_load(group.open_view("group.yaml"))["problems"]
        assert [p.file for p in group.problems] == []   # "gone" was removed: TileDB leaves its folder, no stranger
        for member in group.members:
            obj = member.open()
            if member.type == "array":
                assert isinstance(obj, tdbfs.Array)
                assert oracle.assert_fragments_match_tiledb(obj, member.location) >= 1
                for frag in obj.fragments:
                    oracle.assert_tiles_are_the_tree_files(obj, frag)
                    oracle.assert_cells_are_cells_csv(obj, frag)
                assert obj.open_view("array.yaml") == group.open_view(f"members/{member.name}/array.yaml")
            else:
                assert isinstance(obj, tdbfs.Group) and [m.name for m in obj.members] == ["leaf", "s2"]
        assert isinstance(group["mid"]["leaf"]["d2"], tdbfs.Array)
        assert oracle.check_document(group.check()) == oracle.cli_check_json(str(built.path))


def test_errors_are_one_family_and_name_the_place(tmp_path):
    with pytest.raises(tdbfs.NotFoundError) as missing:
        tdbfs.open(tmp_path / "nothing")
    assert isinstance(missing.value, tdbfs.TdbfsError) and isinstance(missing.value, FileNotFoundError)
    (tmp_path / "plain").mkdir()
    with pytest.raises(tdbfs.NotAnArrayError) as plain:
        tdbfs.open(tmp_path / "plain")
    assert isinstance(plain.value, tdbfs.TdbfsError) and "plain" in str(plain.value)
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=5, capacity=3, n_fragments=1)
    with tiledb.open(str(built.path)) as A:
        stored = A.query(order="G")[:]["a0"]   # the cells in stored order: tile 1 holds cells 3 and 4
    data_file = next(built.path.glob("__fragments/*/a0.tdb"))
    data = bytearray(data_file.read_bytes())
    data[12:16] = b"\xff\xff\xff\x7f"   # tile 0, chunk 0: a filtered size the file cannot hold
    data_file.write_bytes(bytes(data))
    with tdbfs.open(built.path) as array:
        frag = array.fragments[0]
        with pytest.raises(tdbfs.FormatError) as bad:
            frag.tile("a0", 0)
        where = f"{frag.path}/a0.tdb"
        assert (bad.value.file, bad.value.structure, bad.value.offset) == (where, "tile 0", 12)
        assert isinstance(bad.value, tdbfs.TdbfsError)
        assert [(p.file, p.offset, p.severity) for p in frag.problems] == [(where, 12, "error")]
        with pytest.raises(tdbfs.ViewError) as unreadable:   # the mount's EIO, with the reason
            array.open_view(f"fragments/{frag.name}/attrs/a0/tile_0.bin")
        assert isinstance(unreadable.value, tdbfs.TdbfsError) and "at byte 12" in str(unreadable.value)
        assert frag.tile("a0", 1).tolist() == stored[3:].tolist()   # the rest still reads
        with pytest.raises(tdbfs.NotFoundError):
            array.open_view("no/such/file")
        assert "fragments" in repr(array) and frag.name in repr(frag)


def test_import_tdbfs_imports_no_numpy_and_nothing_of_the_library():
    code = ("import sys, tdbfs; assert 'numpy' not in sys.modules, 'numpy'; "
            "assert not [m for m in sys.modules if m.startswith(('tdbfs.library', 'tdbfs.store', 'tdbfs.views'))]; "
            "tdbfs.open; assert 'tdbfs.library.opening' in sys.modules; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "ok", res.stderr


def test_an_encrypted_array_reads_with_its_key(tmp_path):
    built = arrays.make_array(tmp_path, "encrypted")
    with tdbfs.open(built.path, key=arrays.ENCRYPTION_KEY) as array:
        path = str(built.path)
        assert oracle.fragment_info(path, arrays.encryption_ctx()).keys() == set(array.fragments.names())
        for frag in array.fragments:
            assert oracle.assert_tiles_are_the_tree_files(array, frag)
            assert oracle.assert_cells_are_cells_csv(array, frag)
        assert array.check().clean
    with tdbfs.open(built.path) as locked:   # without it: the footer is there, the encrypted tiles are not
        frag = locked.fragments[0]
        with pytest.raises(tdbfs.TdbfsError):
            frag.tile(frag.fields[0].name, 0)
    with pytest.raises(tdbfs.TdbfsError):
        tdbfs.open(built.path, key="too short")
