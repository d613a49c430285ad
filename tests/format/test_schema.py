"""parse_schema / describe_schema against schemas written by TileDB (tiledb-py) and the back-compat corpus."""

from __future__ import annotations

import glob
import math
import os
import shutil
import struct
import time

import numpy as np
import pytest

import tiledb

from tdbfs.format.datatypes import VAR_NUM
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.names import parse_timestamped_name
from tdbfs.format.schema import ArraySchema, parse_schema
from tdbfs.views.describe.schema import describe_schema

from corpus import BACKCOMPAT

# ---------------------------------------------------------------------------
# helpers


def gtile_payload(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    return read_generic_tile(data, 0, path, "schema").payload


def schema_files(uri: str) -> list[str]:
    d = os.path.join(uri, "__schema")
    return sorted((os.path.join(d, n) for n in os.listdir(d) if n != "__enumerations"),
                  key=lambda p: parse_timestamped_name(os.path.basename(p)).sort_key)


def load_schema_file(path: str) -> ArraySchema:
    return parse_schema(gtile_payload(path), path)


def latest_schema(uri: str) -> ArraySchema:
    return load_schema_file(schema_files(uri)[-1])


FILTER_NAMES = {
    "GzipFilter": "GZIP", "ZstdFilter": "ZSTD", "LZ4Filter": "LZ4", "Bzip2Filter": "BZIP2",
    "RleFilter": "RLE", "DoubleDeltaFilter": "DOUBLE_DELTA", "BitWidthReductionFilter": "BIT_WIDTH_REDUCTION",
    "BitShuffleFilter": "BITSHUFFLE", "ByteShuffleFilter": "BYTESHUFFLE", "PositiveDeltaFilter": "POSITIVE_DELTA",
    "ChecksumMD5Filter": "CHECKSUM_MD5", "ChecksumSHA256Filter": "CHECKSUM_SHA256",
    "DictionaryFilter": "DICTIONARY", "FloatScaleFilter": "SCALE_FLOAT", "XORFilter": "XOR",
    "DeltaFilter": "DELTA", "NoOpFilter": "NONE", "WebpFilter": "WEBP",
}
COMPRESSOR_OF = {"GZIP": "GZIP", "ZSTD": "ZSTD", "LZ4": "LZ4", "BZIP2": "BZIP2", "RLE": "RLE",
                 "DOUBLE_DELTA": "DOUBLE_DELTA", "DICTIONARY": "DICTIONARY", "DELTA": "DELTA"}


def assert_filters_match(ours, theirs, what=""):
    """Our FilterPipeline against a tiledb FilterList: names, options, chunk size."""
    assert ours.max_chunk_size == theirs.chunksize, what
    assert len(ours.filters) == len(theirs), (what, ours.names, theirs)
    for f, t in zip(ours.filters, theirs):
        name = FILTER_NAMES[type(t).__name__]
        assert f.name == name, what
        o = f.options
        if name in COMPRESSOR_OF:
            assert o["compressor"] == COMPRESSOR_OF[name]
            assert o["level"] == t.level, (what, name)
        if name in ("DOUBLE_DELTA", "DELTA"):
            expected = t.reinterp_dtype
            if expected is None:
                assert o.get("reinterpret_type", "ANY") == "ANY"
            else:
                assert o["reinterpret_type"] == np_to_tiledb_name(np.dtype(expected))
        if name in ("BIT_WIDTH_REDUCTION", "POSITIVE_DELTA"):
            assert o["max_window_size"] == t.window
        if name == "SCALE_FLOAT":
            assert o["scale"] == t.factor and o["offset"] == t.offset and o["byte_width"] == t.bytewidth
        if name == "WEBP":
            assert o["quality"] == pytest.approx(t.quality)
            assert o["lossless"] == bool(t.lossless)


def np_to_tiledb_name(dt: np.dtype) -> str:
    if dt.kind in "iu":
        return ("UINT" if dt.kind == "u" else "INT") + str(dt.itemsize * 8)
    if dt.kind == "f":
        return "FLOAT" + str(dt.itemsize * 8)
    raise AssertionError(dt)


def assert_schema_matches(ours: ArraySchema, theirs) -> None:
    """Every field we decode equals what libtiledb reports for the same schema."""
    assert ours.version == theirs._version
    assert ours.array_type == (1 if theirs.sparse else 0)
    d = describe_schema(ours)
    assert d["array_type"] == ("sparse" if theirs.sparse else "dense")
    assert d["tile_order"] == theirs._tile_order.name.lower().replace("_", "-")
    assert d["cell_order"] == theirs._cell_order.name.lower().replace("_", "-")
    assert ours.capacity == theirs.capacity
    assert ours.allows_dups == theirs._allows_dups
    assert_filters_match(ours.coords_filters, theirs.coords_filters, "coords")
    assert_filters_match(ours.offsets_filters, theirs.offsets_filters, "offsets")
    if ours.version >= 7:
        assert_filters_match(ours.validity_filters, theirs.validity_filters, "validity")
    else:
        assert ours.validity_filters is None

    assert len(ours.dimensions) == theirs.domain.ndim
    for dim, tdim in zip(ours.dimensions, theirs.domain):
        assert dim.name == tdim.name
        assert dim.datatype.name == tdim._tiledb_dtype.name
        assert dim.var_sized == tdim.isvar
        assert dim.cell_val_num == (VAR_NUM if tdim.isvar else tdim._ncell)
        # v>=5: a dimension without its own filters reports the coords pipeline;
        # v<5 dimensions store no pipeline and libtiledb reports an empty one
        own = dim.filters if dim.filters.filters or ours.version < 5 else ours.coords_filters
        assert_filters_match(own, tdim.filters, f"dimension {dim.name}")
        if tdim.isvar:
            assert dim.domain is None and dim.tile_extent is None and dim.domain_raw == b""
        else:
            lo, hi = tdim.domain
            if dim.datatype.is_datetime:
                lo, hi = lo.astype("int64"), hi.astype("int64")
            assert dim.domain == (lo, hi)
            assert type(dim.domain[0]) in (int, float)
            if tdim.tile is None:
                assert dim.tile_extent is None
            else:
                tile = tdim.tile
                if dim.datatype.is_datetime:
                    tile = np.asarray(tile).astype("int64")
                assert dim.tile_extent == tile

    assert len(ours.attributes) == theirs.nattr
    for attr, tattr in zip(ours.attributes, theirs):
        assert attr.name == tattr.name
        assert attr.datatype.name == tattr._tiledb_dtype.name
        assert attr.cell_val_num == tattr._ncell
        assert attr.var_sized == tattr.isvar
        assert attr.nullable == tattr.isnullable
        assert_filters_match(attr.filters, tattr.filters, f"attribute {attr.name}")
        # (tiledb-py cannot report the fill of nullable attributes and crashes on var numeric ones)
        if not tattr.isnullable and not (tattr.isvar and not attr.datatype.is_string):
            assert attr.fill_value == np.asarray(tattr._fill).tobytes()
        assert (attr.enumeration_name or None) == tattr.enum_label


# ---------------------------------------------------------------------------
# real arrays written by tiledb-py


ATTR_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
               np.float32, np.float64, "M8[D]", "M8[ns]", "m8[s]", np.bool_, "S", "U", "S3", "var_i4"]


def test_every_attribute_dtype(tmp_path):
    uri = str(tmp_path / "attrs")
    attrs = []
    for i, dt in enumerate(ATTR_DTYPES):
        if dt == "var_i4":
            attrs.append(tiledb.Attr(f"a{i}", dtype=np.int32, var=True))
        else:
            attrs.append(tiledb.Attr(f"a{i}", dtype=dt))
    attrs.append(tiledb.Attr("nul", dtype=np.float32, nullable=True))
    attrs.append(tiledb.Attr("filled", dtype=np.float64, fill=3.5))
    attrs.append(tiledb.Attr("filled_s", dtype="S4", fill=b"abcd"))
    attrs.append(tiledb.Attr("ascii", dtype="ascii", var=True))
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 99), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs, capacity=123))
    ours = latest_schema(uri)
    assert_schema_matches(ours, tiledb.ArraySchema.load(uri))
    assert ours.version == 22 and ours.capacity == 123
    by_name = {a.name: a for a in ours.attributes}
    d = {a["name"]: a for a in describe_schema(ours)["attributes"]}
    # datatypes as TileDB names them
    assert [by_name[f"a{i}"].datatype.name for i in range(14)] == [
        "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FLOAT32", "FLOAT64",
        "DATETIME_DAY", "DATETIME_NS", "TIME_SEC", "BOOL"]
    assert by_name["a14"].datatype.name == "CHAR" and by_name["a14"].var_sized
    assert by_name["a15"].datatype.name == "STRING_UTF8" and d["a15"]["cell_val_num"] == "var"
    assert by_name["a16"].cell_val_num == 3 and d["a16"]["fill_value"] == "\\x80\\x80\\x80"
    assert by_name["ascii"].datatype.name == "STRING_ASCII"
    # fill values decoded as values and hex
    assert d["a0"]["fill_value"] == -128 and d["a0"]["fill_value_hex"] == "80"
    assert d["a7"]["fill_value"] == 2 ** 64 - 1
    assert math.isnan(d["a8"]["fill_value"])
    assert d["a10"]["fill_value"] == -(2 ** 63)
    assert d["a13"]["fill_value"] is False
    assert d["filled"]["fill_value"] == 3.5 and d["filled"]["fill_value_hex"] == struct.pack("<d", 3.5).hex()
    assert d["filled_s"]["fill_value"] == "abcd"
    assert d["nul"]["nullable"] is True and d["a0"]["nullable"] is False
    assert all(a["order"] == "unordered" and a["enumeration"] is None for a in d.values())


@pytest.mark.parametrize("dtype,domain,tile", [
    (np.int8, (-100, 100), 10), (np.int16, (-1000, 1000), 100), (np.int32, (-(2 ** 31), 2 ** 31 - 2), 1000),
    (np.int64, (-(2 ** 62), 2 ** 62), 2 ** 20), (np.uint8, (0, 200), 8), (np.uint16, (1, 60000), 64),
    (np.uint32, (0, 2 ** 32 - 2), 2 ** 16), (np.uint64, (0, 2 ** 63), 2 ** 32),
    (np.float32, (-1.5, 1.5), 0.25), (np.float64, (-1e300, 1e300), 1e299),
    ("M8[D]", (np.datetime64("2000-01-01"), np.datetime64("2030-12-31")), np.timedelta64(7, "D")),
    ("M8[ms]", (np.datetime64(0, "ms"), np.datetime64(10 ** 12, "ms")), np.timedelta64(3600000, "ms")),
    ("ascii", (None, None), None),
])
def test_dimension_types(tmp_path, dtype, domain, tile):
    uri = str(tmp_path / "dims")
    dim = tiledb.Dim("d", domain=domain if dtype != "ascii" else None, tile=tile, dtype=dtype)
    dom = tiledb.Domain(dim, tiledb.Dim("other", domain=(1, 4), tile=2, dtype=np.uint64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)],
                                                allows_duplicates=True))
    ours = latest_schema(uri)
    assert_schema_matches(ours, tiledb.ArraySchema.load(uri))
    assert ours.allows_dups is True
    dd = describe_schema(ours)["domain"]["dimensions"][0]
    if dtype == "ascii":
        assert dd["datatype"] == "STRING_ASCII" and dd["domain"] is None and dd["cell_val_num"] == "var"
        assert dd["null_tile_extent"] is True and dd["tile_extent"] is None
    elif isinstance(domain[0], np.datetime64):
        assert dd["domain"] == [int(domain[0].astype("int64")), int(domain[1].astype("int64"))]
        assert dd["tile_extent"] == int(tile.astype("int64"))
    else:
        assert dd["domain"] == [pytest.approx(domain[0]), pytest.approx(domain[1])]
        assert dd["tile_extent"] == pytest.approx(tile)


def test_dense_layouts_and_filters(tmp_path):
    uri = str(tmp_path / "dense")
    filters = [tiledb.GzipFilter(level=7), tiledb.ZstdFilter(level=3), tiledb.LZ4Filter(level=2),
               tiledb.Bzip2Filter(level=9), tiledb.RleFilter(), tiledb.BitWidthReductionFilter(window=128),
               tiledb.ByteShuffleFilter(), tiledb.BitShuffleFilter(), tiledb.PositiveDeltaFilter(window=512),
               tiledb.ChecksumMD5Filter(), tiledb.ChecksumSHA256Filter(), tiledb.XORFilter(), tiledb.NoOpFilter()]
    attrs = [
        tiledb.Attr("ints", dtype=np.int64, filters=tiledb.FilterList(filters, chunksize=1000)),
        tiledb.Attr("dd", dtype=np.int32, filters=[tiledb.DoubleDeltaFilter(reinterp_dtype=np.int32)]),
        tiledb.Attr("delta", dtype=np.uint32, filters=[tiledb.DeltaFilter(reinterp_dtype=np.uint32)]),
        tiledb.Attr("scaled", dtype=np.float64,
                    filters=[tiledb.FloatScaleFilter(factor=0.5, offset=10.0, bytewidth=4)]),
        tiledb.Attr("dict", dtype="ascii", var=True, filters=[tiledb.DictionaryFilter(level=-1)]),
        tiledb.Attr("rle_s", dtype="U", var=True, filters=[tiledb.RleFilter()]),
    ]
    dom = tiledb.Domain(tiledb.Dim("r", domain=(1, 100), tile=10, dtype=np.int64,
                                   filters=[tiledb.ZstdFilter(level=5)]),
                        tiledb.Dim("c", domain=(1, 50), tile=25, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, attrs=attrs, cell_order="col-major", tile_order="row-major",
                                offsets_filters=[tiledb.PositiveDeltaFilter(), tiledb.LZ4Filter()],
                                validity_filters=[tiledb.GzipFilter(level=2)])
    tiledb.Array.create(uri, schema)
    ours = latest_schema(uri)
    assert_schema_matches(ours, tiledb.ArraySchema.load(uri))
    d = describe_schema(ours)
    assert d["array_type"] == "dense" and d["cell_order"] == "col-major" and d["tile_order"] == "row-major"
    ints = d["attributes"][0]["filters"]
    assert ints["max_chunk_size"] == 1000
    assert [f["name"] for f in ints["filters"]] == [
        "GZIP", "ZSTD", "LZ4", "BZIP2", "RLE", "BIT_WIDTH_REDUCTION", "BYTESHUFFLE", "BITSHUFFLE",
        "POSITIVE_DELTA", "CHECKSUM_MD5", "CHECKSUM_SHA256", "XOR", "NONE"]
    assert ints["filters"][0]["options"] == {"compressor": "GZIP", "level": 7}
    assert ints["filters"][5]["options"] == {"max_window_size": 128}
    assert d["attributes"][1]["filters"]["filters"][0]["options"]["reinterpret_type"] == "INT32"
    assert d["attributes"][2]["filters"]["filters"][0]["options"]["reinterpret_type"] == "UINT32"
    assert d["attributes"][3]["filters"]["filters"][0]["options"] == {"scale": 0.5, "offset": 10.0, "byte_width": 4}
    assert d["attributes"][4]["filters"]["filters"][0]["options"]["compressor"] == "DICTIONARY"
    assert [f["name"] for f in d["offsets_filters"]["filters"]] == ["POSITIVE_DELTA", "LZ4"]
    assert [f["name"] for f in d["validity_filters"]["filters"]] == ["GZIP"]
    assert d["domain"]["dimensions"][0]["filters"]["filters"][0]["options"] == {"compressor": "ZSTD", "level": 5}
    # keys in spec order
    assert list(d) == ["version", "allows_dups", "array_type", "tile_order", "cell_order", "capacity",
                       "coords_filters", "offsets_filters", "validity_filters", "domain", "attributes",
                       "dimension_labels", "enumerations", "current_domain"]
    assert list(d["attributes"][0]) == ["name", "datatype", "cell_val_num", "filters", "fill_value",
                                        "fill_value_hex", "nullable", "fill_value_validity", "order", "enumeration"]


def test_hilbert_and_defaults(tmp_path):
    uri = str(tmp_path / "hilbert")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 1000), tile=100, dtype=np.uint32),
                        tiledb.Dim("y", domain=(0, 1000), tile=100, dtype=np.uint32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, cell_order="hilbert",
                                                attrs=[tiledb.Attr("v", dtype=np.float32)]))
    ours = latest_schema(uri)
    assert_schema_matches(ours, tiledb.ArraySchema.load(uri))
    d = describe_schema(ours)
    assert d["cell_order"] == "hilbert" and d["capacity"] == 10000
    # the defaults of docs/format.md §4.1
    assert d["coords_filters"] == {"max_chunk_size": 65536, "filters": [
        {"name": "ZSTD", "id": 2, "options": {"compressor": "ZSTD", "level": -1}}]}
    assert d["validity_filters"]["filters"][0]["options"] == {"compressor": "RLE", "level": -1}
    assert d["current_domain"] == {"version": 0, "empty": True}
    assert d["dimension_labels"] == [] and d["enumerations"] == []


def test_schema_evolution(tmp_path):
    uri = str(tmp_path / "evolve")
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 9), tile=5, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    expected_attrs = [["a"]]
    steps = [("add", "b", np.float64), ("add", "c", "U"), ("drop", "a", None)]
    for op, name, dt in steps:
        time.sleep(0.005)
        se = tiledb.ArraySchemaEvolution()
        if op == "add":
            se.add_attribute(tiledb.Attr(name, dtype=dt))
        else:
            se.drop_attribute(name)
        se.array_evolve(uri)
        attrs = list(expected_attrs[-1])
        attrs = attrs + [name] if op == "add" else [x for x in attrs if x != name]
        expected_attrs.append(attrs)
    files = schema_files(uri)
    assert len(files) == 4
    for path, names in zip(files, expected_attrs):
        ours = load_schema_file(path)
        assert [a.name for a in ours.attributes] == names
        t = parse_timestamped_name(os.path.basename(path)).t2
        with tiledb.open(uri, timestamp=t) as A:
            assert_schema_matches(ours, A.schema)
    assert_schema_matches(load_schema_file(files[-1]), tiledb.ArraySchema.load(uri))


def test_enumeration_refs(tmp_path):
    uri = str(tmp_path / "enums")
    enums = [tiledb.Enumeration("colors", False, ["red", "green", "blue"]),
             tiledb.Enumeration("sizes", True, np.array([10, 20, 30], dtype=np.int16))]
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 9), tile=5, dtype=np.int32))
    attrs = [tiledb.Attr("color", dtype=np.uint8, enum_label="colors"),
             tiledb.Attr("size", dtype=np.int32, enum_label="sizes"), tiledb.Attr("plain", dtype=np.int32)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs, enums=enums))
    ours = latest_schema(uri)
    assert_schema_matches(ours, tiledb.ArraySchema.load(uri))
    refs = {e.name: e.file_name for e in ours.enumerations}
    assert set(refs) == {"colors", "sizes"}
    on_disk = set(os.listdir(os.path.join(uri, "__schema", "__enumerations")))
    assert set(refs.values()) == on_disk
    for fname in refs.values():
        assert fname.startswith("__") and fname.endswith("_0")
    d = describe_schema(ours)
    assert [a["enumeration"] for a in d["attributes"]] == ["colors", "sizes", None]
    assert {e["name"] for e in d["enumerations"]} == {"colors", "sizes"}


def test_dimension_labels(tmp_path):
    uri = str(tmp_path / "labels")
    d0 = tiledb.Dim("d0", domain=(0, 9), tile=5, dtype=np.int32)
    d1 = tiledb.Dim("d1", domain=(1, 4), tile=2, dtype=np.int32)
    labels = {0: {"l0": d0.create_label_schema(order="increasing", dtype=np.float64)},
              1: {"names": d1.create_label_schema(order="decreasing", dtype="ascii")}}
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=tiledb.Domain(d0, d1), attrs=[tiledb.Attr("a", dtype=np.int32)],
                                                dim_labels=labels))
    ours = latest_schema(uri)
    theirs = tiledb.ArraySchema.load(uri)
    assert_schema_matches(ours, theirs)
    assert len(ours.labels) == 2
    for lb in ours.labels:
        t = theirs.dim_label(lb.name)
        assert lb.dim_index == t.dim_index
        assert lb.uri_is_relative is True
        assert t.uri.endswith("/" + lb.uri)
        assert lb.label_attr_name == t.label_attr_name
        assert lb.label_datatype.name == t._tiledb_label_dtype.name
        assert lb.label_cell_val_num == t._label_ncell
        assert lb.is_external is False
    d = describe_schema(ours)["dimension_labels"]
    assert d[0] == {"dim_index": 0, "name": "l0", "uri_is_relative": True, "uri": "__labels/l0",
                    "label_attr_name": "label", "label_order": "increasing", "label_datatype": "FLOAT64",
                    "label_cell_val_num": 1, "is_external": False}
    assert d[1]["label_order"] == "decreasing" and d[1]["label_datatype"] == "STRING_ASCII"
    assert d[1]["label_cell_val_num"] == "var"
    # the label arrays are complete arrays with their own schema
    label_schema = latest_schema(os.path.join(uri, "__labels", "l0"))
    assert [a.name for a in label_schema.attributes] == ["label"]


def test_current_domain(tmp_path):
    uri = str(tmp_path / "cd")
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 999), tile=10, dtype=np.int64), tiledb.Dim("s", dtype="ascii"))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)])
    nd = tiledb.NDRectangle(tiledb.default_ctx(), dom)
    nd.set_range("d0", 5, 50)
    nd.set_range("s", "aa", "zzz")
    cd = tiledb.CurrentDomain(tiledb.default_ctx())
    cd.set_ndrectangle(nd)
    schema.set_current_domain(cd)
    tiledb.Array.create(uri, schema)
    ours = latest_schema(uri)
    theirs = tiledb.ArraySchema.load(uri)
    assert_schema_matches(ours, theirs)
    rect = theirs.current_domain.ndrectangle
    assert ours.current_domain.empty is False and ours.current_domain.type == 0
    assert ours.current_domain.ranges == (rect.range(0), rect.range(1)) == ((5, 50), ("aa", "zzz"))
    assert describe_schema(ours)["current_domain"] == {
        "version": 0, "empty": False, "type": "NDRECTANGLE",
        "ranges": [{"dimension": "d0", "min": 5, "max": 50}, {"dimension": "s", "min": "aa", "max": "zzz"}]}


# ---------------------------------------------------------------------------
# back-compat corpus (read in place; libtiledb only ever sees a copy)


def backcompat_schema_files():
    files = glob.glob(f"{BACKCOMPAT}/v[0-9]*/*/__array_schema.tdb") + glob.glob(f"{BACKCOMPAT}/v[0-9]*/*/__schema/__1*")
    return [pytest.param(f, id=f[len(BACKCOMPAT) + 1:].split("/")[0]) for f in sorted(files) if "pre_format" not in f] \
        or [pytest.param(None, id="corpus-absent")]     # skipped by the backcompat marker, saying why


@pytest.mark.backcompat
@pytest.mark.parametrize("path", backcompat_schema_files())
def test_backcompat_schema_matches_tiledb(tmp_path, path):
    ours = load_schema_file(path)
    expected_version = int(path[len(BACKCOMPAT) + 2:].split("/")[0].split("_")[0])
    assert ours.version == expected_version
    assert ours.trailing_bytes == 0 and ours.problems == ()
    copy = tmp_path / "copy"
    if path.endswith("__array_schema.tdb"):
        copy.mkdir()
        shutil.copy(path, copy / "__array_schema.tdb")
    else:
        (copy / "__schema").mkdir(parents=True)
        shutil.copy(path, copy / "__schema" / os.path.basename(path))
    assert_schema_matches(ours, tiledb.ArraySchema.load(str(copy)))
    d = describe_schema(ours)
    assert ("allows_dups" in d) == (ours.version >= 5)
    assert ("validity_filters" in d) == (ours.version >= 7)
    assert ("dimension_labels" in d) == (ours.version >= 18)
    assert ("enumerations" in d) == (ours.version >= 20)
    assert ("current_domain" in d) == (ours.version >= 22)
    assert ("datatype" in d["domain"]) == (ours.version < 5)
    assert all(("fill_value_default" in a) == (ours.version < 6) for a in d["attributes"])


@pytest.mark.backcompat
def test_backcompat_contents():
    v1 = load_schema_file(f"{BACKCOMPAT}/v01/non_split_coords_v1_4_0/__array_schema.tdb")
    assert v1.domain_datatype.name == "INT32"
    assert [(d.name, d.domain, d.tile_extent) for d in v1.dimensions] == [("d1", (0, 10000), 10001),
                                                                          ("d2", (0, 10000), 10001)]
    assert v1.attributes[0].fill_value == struct.pack("<i", -(2 ** 31)) and not v1.attributes[0].fill_value_stored
    v6 = load_schema_file(f"{BACKCOMPAT}/v06/vcf_ingested_2samples_data/__array_schema.tdb")
    assert [(d.name, d.datatype.name, d.domain) for d in v6.dimensions] == [
        ("contig", "STRING_ASCII", None), ("start_pos", "UINT32", (0, 4294967294)), ("sample", "STRING_ASCII", None)]
    v7 = load_schema_file(f"{BACKCOMPAT}/v07/nullable_attributes/__array_schema.tdb")
    assert v7.dense and [(a.name, a.nullable) for a in v7.attributes] == [("a2", True), ("a1", True)]
    v14 = load_schema_file(glob.glob(f"{BACKCOMPAT}/v14/*/__schema/__1*")[0])
    assert v14.attributes[0].cell_val_num == 3 and v14.attributes[0].datatype.name == "UINT8"
    v20 = load_schema_file(glob.glob(f"{BACKCOMPAT}/v20/*/__schema/__1*")[0])
    assert sorted(e.name for e in v20.enumerations) == ["a0_enum", "a1_enum", "a2_enum", "a3_enum"]
    assert [a.enumeration_name for a in v20.attributes] == ["a0_enum", "a1_enum", "a2_enum", "a3_enum"]
    v22 = load_schema_file(glob.glob(f"{BACKCOMPAT}/v22/*/__schema/__1*")[0])
    assert v22.current_domain.empty and v22.current_domain.version == 0


@pytest.mark.backcompat
def test_experimental_version_is_refused():
    path = glob.glob(f"{BACKCOMPAT}/experimental_UINT32_MAX/*/__schema/__1*")[0]
    payload = gtile_payload(path)
    with pytest.raises(FormatError) as e:
        parse_schema(payload, path)
    assert e.value.offset == 0 and "experimental" in e.value.message
    assert e.value.file == path
    # other impossible versions
    for bad in (0, 24, 0x80000016):
        with pytest.raises(FormatError) as e:
            parse_schema(struct.pack("<I", bad) + payload[4:], "x")
        assert e.value.offset == 0


# ---------------------------------------------------------------------------
# corruption


@pytest.fixture(scope="module")
def rich_payload(tmp_path_factory):
    """A v22 schema using labels, enumerations, a current domain, var dims and fill values."""
    uri = str(tmp_path_factory.mktemp("rich") / "a")
    d0 = tiledb.Dim("d0", domain=(0, 9), tile=5, dtype=np.int64)
    d1 = tiledb.Dim("s", dtype="ascii")
    dom = tiledb.Domain(d0, d1)
    schema = tiledb.ArraySchema(
        domain=dom, sparse=True, enums=[tiledb.Enumeration("e", False, ["x", "y"])],
        attrs=[tiledb.Attr("a", dtype=np.uint8, enum_label="e"), tiledb.Attr("f", dtype=np.float64, fill=1.0)])
    nd = tiledb.NDRectangle(tiledb.default_ctx(), dom)
    nd.set_range("d0", 1, 2)
    nd.set_range("s", "a", "b")
    cd = tiledb.CurrentDomain(tiledb.default_ctx())
    cd.set_ndrectangle(nd)
    schema.set_current_domain(cd)
    tiledb.Array.create(uri, schema)
    return gtile_payload(schema_files(uri)[-1])


def test_every_truncation_raises_at_the_cut(rich_payload):
    full = parse_schema(rich_payload, "s")
    assert full.trailing_bytes == 0
    for cut in range(len(rich_payload)):
        with pytest.raises(FormatError) as e:
            parse_schema(rich_payload[:cut], "__schema/x")
        err = e.value
        assert err.file == "__schema/x" and err.within == "generic tile payload"
        # the error is at the field (or count) that straddles the cut and says what was left
        left = cut - err.offset
        assert left >= 0, (cut, str(err))
        # a count whose items do not fit points at the count, a u32 (the number that cannot be right)
        assert f"only {left} remain" in err.message or f"exceeds the {left - 4} bytes" in err.message, (cut, str(err))


def test_trailing_bytes_and_bad_datatype(rich_payload):
    s = parse_schema(rich_payload + b"\x00\x01", "s")
    assert s.trailing_bytes == 2 and s.problems[0].offset == len(rich_payload)
    assert describe_schema(s)["trailing_bytes"] == 2
    # corrupt the first dimension's datatype byte (follows its name)
    at = rich_payload.index(b"d0") + 2
    bad = rich_payload[:at] + bytes([200]) + rich_payload[at + 1:]
    with pytest.raises(FormatError) as e:
        parse_schema(bad, "s")
    assert e.value.offset == at and "datatype" in e.value.message
    # a huge dimension count is refused before any allocation
    ndim_at = at - 2 - 4 - 4
    assert struct.unpack_from("<I", rich_payload, ndim_at)[0] == 2
    bad = rich_payload[:ndim_at] + struct.pack("<I", 0xFFFFFFF0) + rich_payload[ndim_at + 4:]
    with pytest.raises(FormatError) as e:
        parse_schema(bad, "s")
    assert e.value.offset == ndim_at and "exceeds" in e.value.message      # at the count itself
