"""`tdbfs export` and the library's Array.cells()/export(): the Parquet file, read back with pyarrow and
duckdb, equals tiledb-py's read (values, nulls, column types) for every kind of attribute; the CSV is the
rows the tree shows; stdout, --subarray, --fragment; errors are one line and exit 2; without pyarrow a
.parquet OUT names the extra."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tiledb

import arrays
from mounting import tdbfs_command

import tdbfs


def run(*args, env=None):
    return subprocess.run(tdbfs_command() + [str(a) for a in args], capture_output=True, timeout=120, env=env)


def only_fragment(path) -> str:
    names = sorted(os.listdir(os.path.join(path, "__fragments")))
    assert len(names) == 1
    return names[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def all_dtypes(base):
    """One fragment of every attribute type tiledb-py writes: ints of every width, floats, bool, datetime64
    ns and D, 'S1', 3 x float32, 'S3', var UTF-8, var bytes, var ASCII, var int32, nullable float64 / int16 /
    var UTF-8 (tests/arrays.py profile all_dtypes)."""
    return str(arrays.make_array(base, "all_dtypes", cells=11, capacity=4))


@pytest.fixture(scope="module")
def more_types(base):
    """What all_dtypes lacks: datetimes in ms, s and us, BLOB, nullable var int64, nullable bool and uint32,
    a string dimension and an int8 one."""
    path = str(base / "more_types")
    attrs = [tiledb.Attr("t_ms", dtype="datetime64[ms]"), tiledb.Attr("t_s", dtype="datetime64[s]"),
             tiledb.Attr("t_us", dtype="datetime64[us]"), tiledb.Attr("blob", dtype="blob", var=True),
             tiledb.Attr("nvi", dtype=np.int64, var=True, nullable=True),
             tiledb.Attr("nb", dtype=np.bool_, nullable=True), tiledb.Attr("nu", dtype=np.uint32, nullable=True)]
    dims = [tiledb.Dim("s", dtype="ascii", domain=(None, None), tile=None),
            tiledb.Dim("d", domain=(-5, 5), tile=2, dtype=np.int8)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, attrs=attrs, capacity=3))
    n = 7
    nvi = np.empty(n, object)
    nvi[:] = [np.arange(k % 3, dtype=np.int64) * 10 ** 12 + k for k in range(n)]
    blob = np.empty(n, object)
    blob[:] = [bytes([0, k, 255]) * k for k in range(n)]
    data = {"t_ms": np.arange(n).astype("datetime64[ms]") + 1_700_000_000_000,
            "t_s": np.arange(n).astype("datetime64[s]") - 86_400 * 365,
            "t_us": (np.arange(n) * 1_000_003).astype("datetime64[us]"),
            "blob": blob, "nvi": nvi, "nb": np.arange(n) % 2 == 0, "nu": np.arange(n, dtype=np.uint32) * 70_001}
    validity = {"nvi": (np.arange(n) % 3 != 1).astype(np.uint8), "nb": (np.arange(n) % 2).astype(np.uint8),
                "nu": (np.arange(n) % 4 != 0).astype(np.uint8)}
    with tiledb.open(path, "w") as A:
        arrays._setitem_impl_sparse(A, ([b"k%d" % k for k in range(n)], np.arange(n, dtype=np.int8) - 3),
                                    data, validity)
    return path


@pytest.fixture(scope="module")
def dense_all(base):
    return str(arrays.make_array(base, "all_dtypes", sparse=False))


#: the Arrow type each tiledb-py numpy dtype's values have (not derived from tdbfs's own mapping)
def expected_type(values: np.ndarray, var: bool, tiledb_type: str):
    dt = values.dtype
    if dt.names:   # several values per cell
        return pa.list_(pa.from_numpy_dtype(dt[0]), len(dt.names))
    if dt.kind == "O":
        first = next(v for v in values if v is not None and v is not np.ma.masked)
        if isinstance(first, str):
            return pa.string()
        if isinstance(first, (bytes, memoryview)):   # tiledb-py returns a BLOB cell as a memoryview
            return pa.binary()
        return pa.list_(pa.from_numpy_dtype(first.dtype))
    if dt.kind == "S":
        return pa.binary()
    if dt.kind == "M":
        unit = np.datetime_data(dt)[0]
        return pa.date32() if unit == "D" else pa.timestamp(unit)
    return pa.from_numpy_dtype(dt)


def tiledb_read(path, **query) -> dict:
    with tiledb.open(path) as A:
        return A.query(**query)[:] if query else A[:]


def tiledb_column(values, typ) -> pa.Array:
    """tiledb-py's values of one field as an Arrow array of `typ` (masked cells as nulls)."""
    mask = np.ma.getmaskarray(values) if isinstance(values, np.ma.MaskedArray) else None
    data = np.ma.getdata(values)
    if data.dtype.names:
        items = [list(r) for r in data.tolist()]
    elif data.dtype.kind == "O":
        items = [v.tolist() if isinstance(v, np.ndarray) else bytes(v) if isinstance(v, memoryview) else v
                 for v in data]
    elif data.dtype.kind in "SM":
        return pa.array(data.tolist() if data.dtype.kind == "S" else data, typ, mask=mask)
    else:
        return pa.array(data, typ, mask=mask)
    if mask is not None:
        items = [None if m else v for v, m in zip(items, mask)]
    return pa.array(items, typ)


def assert_equals_tiledb(table: pa.Table, path: str, fragment: str, subarray=None, parquet: bool = True):
    """Every column of `table` equals tiledb-py's read of the one-fragment array at `path` (values, nulls
    and the Arrow type), sorted alike; `fragment` and `tile` name the fragment and a tile of it. Parquet
    has no timestamp in seconds: there, they come back in ms."""
    with tiledb.open(path) as A:
        schema = A.schema
        dims = [d.name for d in schema.domain]
        query = A.query(coords=True)
        # not multi_index: it drops the mask of nullable attributes
        got = query[subarray] if subarray is not None else query[:]
        got = {k: v.ravel() for k, v in got.items()}   # a dense read comes shaped as its domain
        var = {a.name: a.isvar for a in (schema.attr(i) for i in range(schema.nattr))}
        types = {a.name: a.dtype for a in (schema.attr(i) for i in range(schema.nattr))}
    assert table.column_names == dims + list(var) + ["fragment", "tile"]
    assert table.num_rows == len(got[dims[0]]) > 0
    # tdbfs gives TileDB's global order; tiledb-py's read of one fragment too, but sort both to be sure
    keys = [table.column(d).to_pylist() for d in dims]
    order = sorted(range(table.num_rows), key=lambda i: tuple(k[i] for k in keys))
    ref_keys = [np.asarray(got[d]).tolist() for d in dims]
    ref_order = sorted(range(table.num_rows), key=lambda i: tuple(k[i] for k in ref_keys))
    for name in dims + list(var):
        column = table.column(name).combine_chunks().take(pa.array(order))
        want_type = expected_type(np.ma.getdata(got[name]), var.get(name, False), str(types.get(name)))
        want = tiledb_column(got[name], want_type).take(pa.array(ref_order))
        if parquet and want_type == pa.timestamp("s"):
            want_type = pa.timestamp("ms")
            want = want.cast(want_type)
        assert column.type == want_type, name
        assert column.equals(want), (name, column.to_pylist()[:4], want.to_pylist()[:4])
    assert set(table.column("fragment").to_pylist()) == {fragment}
    assert table.schema.field("fragment").type == pa.dictionary(pa.int32(), pa.string())
    assert table.column("tile").type == pa.int64() and min(table.column("tile").to_pylist()) == 0


@pytest.mark.parametrize("fixture", ["all_dtypes", "more_types", "dense_all"])
def test_parquet_equals_tiledb_read(fixture, request, tmp_path):
    path = request.getfixturevalue(fixture)
    frag = only_fragment(path)
    out = tmp_path / "cells.parquet"
    r = run("export", "--fragment", frag, path, out)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    table = pq.read_table(out)
    assert_equals_tiledb(table, path, frag)
    # every field says its TileDB datatype, so a unit Arrow lacks is never silent
    assert table.schema.field(table.column_names[1]).metadata[b"tiledb_datatype"] in (b"INT8", b"INT64",
                                                                                       b"DATETIME_MS")


def test_duckdb_reads_the_same(all_dtypes, more_types, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    want_types = {"x_int8": "TINYINT", "x_uint16": "USMALLINT", "x_uint64": "UBIGINT", "x_float32": "FLOAT",
                  "x_datetime64_ns": "TIMESTAMP_NS", "x_datetime64_D": "DATE", "x_bool": "BOOLEAN",
                  "x_S1": "BLOB", "f3": "FLOAT[]", "vu": "VARCHAR", "vs": "BLOB", "vi": "INTEGER[]",
                  "nf": "DOUBLE", "t_ms": "TIMESTAMP", "t_s": "TIMESTAMP", "t_us": "TIMESTAMP",
                  "blob": "BLOB", "nvi": "BIGINT[]", "nb": "BOOLEAN", "nu": "UINTEGER", "s": "BLOB",
                  "d": "TINYINT", "tile": "BIGINT"}
    for path in (all_dtypes, more_types):
        out = tmp_path / (os.path.basename(path) + ".parquet")
        assert run("export", "--fragment", only_fragment(path), path, out).returncode == 0
        con = duckdb.connect()
        described = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM '{out}'").fetchall()}
        for name, typ in want_types.items():
            if name in described:
                assert described[name] == typ, name
        table = pq.read_table(out)
        for name in table.column_names:
            if described[name].startswith("TIMESTAMP"):   # Python datetimes drop ns: compare epoch numbers
                got = [r[0] for r in con.execute(f"SELECT epoch_ns(\"{name}\") FROM '{out}'").fetchall()]
                want = table.column(name).cast(pa.int64()).to_pylist()
                unit = table.schema.field(name).type.unit
                want = [None if v is None else v * {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit] for v in want]
            else:
                got = [r[0] for r in con.execute(f"SELECT \"{name}\" FROM '{out}'").fetchall()]
                want = table.column(name).to_pylist()
                got = [list(v) if isinstance(v, tuple) else v for v in got]
            assert got == want, name
        assert described["nf"] == "DOUBLE" if "nf" in described else described["nu"] == "UINTEGER"


def test_csv_is_the_fragment_rows_with_their_source(all_dtypes, tmp_path):
    """`--fragment F OUT.csv`: the rows of fragments/F/cells.csv, each followed by F and its tile, which
    cells/tile_K.csv confirms; `-` writes the same bytes to stdout."""
    frag = only_fragment(all_dtypes)
    out = tmp_path / "cells.csv"
    assert run("export", "--fragment", frag, all_dtypes, out).returncode == 0
    text = out.read_bytes()
    shown = run("cat", all_dtypes, f"fragments/{frag}/cells.csv").stdout
    lines, shown_lines = text.decode().splitlines(), shown.decode().splitlines()
    assert lines[0] == shown_lines[0] + ",fragment,tile"
    tile_of = {}
    for k in range(3):   # 11 cells, capacity 4
        for line in run("cat", all_dtypes, f"fragments/{frag}/cells/tile_{k}.csv").stdout.decode().splitlines()[1:]:
            tile_of[line] = k
    assert len(lines) == len(shown_lines) == 12
    for line, row in zip(lines[1:], shown_lines[1:]):
        assert line == f'{row},"{frag}",{tile_of[row]}'
    stdout = run("export", "--fragment", frag, all_dtypes, "-")
    assert stdout.returncode == 0 and stdout.stdout == text
    rows = list(csv.DictReader(io.StringIO(text.decode(), newline="")))
    assert [r["vu"] for r in rows] == list(tiledb_read(all_dtypes)["vu"])


def test_subarray_with_fragment(more_types, all_dtypes, tmp_path):
    frag = only_fragment(all_dtypes)
    out = tmp_path / "sub.parquet"
    r = run("export", "--fragment", frag, "--subarray", "d0=30..200", all_dtypes, out)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    assert_equals_tiledb(table, all_dtypes, frag, subarray=slice(30, 201))   # tiledb-py's slice: half-open
    assert 0 < table.num_rows < 11
    # a string dimension and several ranges of one dimension
    out = tmp_path / "sub2.csv"
    r = run("export", "--fragment", only_fragment(more_types), "--subarray", "s=k1..k4,d=-2;0..1", more_types, out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(), newline="")))
    assert [(r["s"], r["d"]) for r in rows] == [("k1", "-2"), ("k3", "0"), ("k4", "1")]


@pytest.mark.parametrize("args, message", [
    (["--subarray", "x=1..2"], "no dimension 'x'"),
    (["--subarray", "d0=9..4"], "starts after it ends"),
    (["--subarray", "d0=a..4"], "is not an integer"),
    (["--fragment", "__nope"], "no fragment '__nope'"),
    (["--as-of", "yesterday"], "--as-of 'yesterday'"),
    (["--as-of", "5", "--fragment", "FRAG"], "give a fragment or a time, not both"),
])
def test_usage_errors_are_one_line(all_dtypes, tmp_path, args, message):
    args = [only_fragment(all_dtypes) if a == "FRAG" else a for a in args]
    frag = [] if "--fragment" in args or "--as-of" in args else ["--fragment", only_fragment(all_dtypes)]
    out = tmp_path / "x.csv"
    r = run("export", *frag, *args, all_dtypes, out)
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1 and message in r.stderr.decode(), r.stderr
    assert not out.exists() and os.listdir(tmp_path) == []


def test_out_exists_or_badly_named(all_dtypes, tmp_path):
    frag = only_fragment(all_dtypes)
    out = tmp_path / "x.parquet"
    out.write_bytes(b"keep me")
    r = run("export", "--fragment", frag, all_dtypes, out)
    assert r.returncode == 2 and b"exists" in r.stderr and r.stderr.count(b"\n") == 1
    assert out.read_bytes() == b"keep me"
    assert run("export", "--fragment", frag, "--force", all_dtypes, out).returncode == 0
    assert pq.read_table(out).num_rows == 11
    assert sorted(os.listdir(tmp_path)) == ["x.parquet"]   # no temporary left behind
    r = run("export", "--fragment", frag, all_dtypes, tmp_path / "x.json")
    assert r.returncode == 2 and b".csv or .parquet" in r.stderr and r.stderr.count(b"\n") == 1
    # OUT's folder missing: one line naming OUT, exit 1, nothing written
    r = run("export", "--fragment", frag, all_dtypes, tmp_path / "no" / "x.csv")
    assert r.returncode == 1 and r.stderr.decode().startswith(f"tdbfs: error: {tmp_path}/no/x.csv: No such file")
    assert sorted(os.listdir(tmp_path)) == ["x.parquet"]


#: runs `tdbfs` (or a snippet) in a Python where `import pyarrow` fails, as without the [parquet] extra
NO_PYARROW = "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None; "


def test_without_pyarrow(all_dtypes, tmp_path):
    frag = only_fragment(all_dtypes)
    cmd = [sys.executable, "-c", NO_PYARROW + "from tdbfs.cli.main import run; sys.argv[0] = 'tdbfs'; run()",
           "export", "--fragment", frag, all_dtypes]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(cmd + [str(tmp_path / "x.parquet")], capture_output=True, timeout=120, env=env)
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1, r.stderr
    assert b"pip install 'tdbfs[parquet]'" in r.stderr
    assert not (tmp_path / "x.parquet").exists()
    # CSV needs no pyarrow, and Array.cells() gives numpy columns instead of a Table
    r = subprocess.run(cmd + [str(tmp_path / "x.csv")], capture_output=True, timeout=120, env=env)
    assert r.returncode == 0 and (tmp_path / "x.csv").read_bytes().startswith(b"d0,x_int8,")
    code = (NO_PYARROW + "import tdbfs; c = tdbfs.open(sys.argv[1]).cells(fragment=sys.argv[2]); "
            "print(type(c).__name__, sorted(c)[:2], c['vu'][:2].tolist(), c['fragment'][0] == sys.argv[2])")
    r = subprocess.run([sys.executable, "-c", code, all_dtypes, frag], capture_output=True, timeout=120, env=env)
    want = list(tiledb_read(all_dtypes)["vu"][:2])
    assert r.stdout.decode().strip() == f"dict ['d0', 'f3'] {want} True", r.stderr


def test_library(all_dtypes, tmp_path):
    frag = only_fragment(all_dtypes)
    with tdbfs.open(all_dtypes) as array:
        table = array.cells(fragment=frag)
        assert isinstance(table, pa.Table)
        assert_equals_tiledb(table, all_dtypes, frag, parquet=False)
        assert array.export(tmp_path / "a.parquet", fragment=frag) == 11
        assert pq.read_table(tmp_path / "a.parquet").equals(table)
        with pytest.raises(FileExistsError):
            array.export(tmp_path / "a.parquet", fragment=frag)
        assert array.export(tmp_path / "a.csv", fragment=frag, subarray="d0=0..100") == \
            len(array.cells(fragment=frag, subarray="d0=0..100"))


# -- what TileDB returns at T (the reader) ----------------------------------------------------------------

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "reader"))
import cells_reference  # noqa: E402 -- tests/reader's tiledb-py reference, as multisets of rows
import histories  # noqa: E402


def table_rows(table: pa.Table) -> "cells_reference.Counter":
    """The rows of an exported table as cells_reference normalises tiledb-py's (strings as bytes, NaN as
    "nan", lists as tuples, null as None), without `fragment` and `tile`."""
    cols = []
    for name in table.column_names[:-2]:
        typ = table.schema.field(name).type
        values = table.column(name).to_pylist()
        if pa.types.is_string(typ):
            values = [None if v is None else v.encode() for v in values]
        elif pa.types.is_floating(typ):
            values = [None if v is None else "nan" if v != v else v for v in values]
        elif pa.types.is_list(typ) or pa.types.is_fixed_size_list(typ):
            values = [None if v is None else tuple(v) for v in values]
        cols.append(values)
    return cells_reference.Counter(zip(*cols))


@pytest.fixture(scope="module")
def history(base):
    """Five overlapping writes of distinct values (a = 1000 * write + i), a delete, an attribute added by
    evolution, then everything consolidated and not vacuumed (tests/reader/histories.py)."""
    uri = str(base / "history")
    return uri, histories.overlapping(uri, consolidate="all")


def test_parquet_at_every_time_equals_tiledb(history, tmp_path):
    uri, h = history
    with tdbfs.open(uri) as array:
        for t in h["times"]:
            out = tmp_path / f"{t}.parquet"
            n = array.export(out, as_of=t)
            table = pq.read_table(out)
            assert table.num_rows == n
            assert table_rows(table) == cells_reference.tiledb_rows(uri, t), t
            # each value's source: a fragment whose time range holds the write that made the value
            for a, name in zip(table.column("a").to_pylist(), table.column("fragment").to_pylist()):
                t1, t2 = (int(x) for x in name.split("_")[2:4])
                assert t1 <= h["writes"][a // 1000] <= t2, (t, a, name)
    assert {r["fragment"] for r in pq.read_table(tmp_path / f"{h['times'][-1]}.parquet").to_pylist()} == \
        {name for name in os.listdir(os.path.join(uri, "__fragments")) if name.split("_")[2] != name.split("_")[3]}


def test_csv_is_the_as_of_view(history, tmp_path):
    uri, h = history
    for t in (h["times"][4], h["times"][-1]):
        out = tmp_path / f"{t}.csv"
        r = run("export", "--as-of", t, uri, out)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        view = run("cat", uri, f"as_of/{t}/cells.csv")
        assert out.read_bytes() == view.stdout and view.stdout.count(b"\n") > 10
        stdout = run("export", "--as-of", t, "--subarray", "x=5..20,s=k1..k3", uri, "-").stdout
        assert stdout == run("cat", uri, f"as_of/{t}/cells/x=5..20,s=k1..k3.csv").stdout
        assert stdout.count(b"\n") > 2 and len(stdout) < len(view.stdout)
    # without --as-of: now
    assert run("export", uri, "-").stdout == run("cat", uri, "as_of/now/cells.csv").stdout


def test_subarray_at_a_time_equals_tiledb(history, tmp_path):
    uri, h = history
    t = h["times"][6]
    out = tmp_path / "sub.parquet"
    r = run("export", "--as-of", t, "--subarray", "x=5..20;30..35,s=k1..k3", uri, out)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    want = cells_reference.tiledb_rows(uri, t, [[(5, 20), (30, 35)], [(b"k1", b"k3")]])
    assert table_rows(table) == want and sum(want.values()) > 3


def test_dense_fill_cells_have_no_source(base, tmp_path):
    """Cells of the non-empty domain no fragment wrote hold the fill value: null `fragment` and `tile` in
    Parquet, empty fields in CSV; the newest write wins where two overlap."""
    uri = str(base / "dense_fill")
    dim = tiledb.Dim("d", domain=(0, 11), tile=4, dtype=np.int32)
    tiledb.Array.create(uri, tiledb.ArraySchema(tiledb.Domain(dim), attrs=[tiledb.Attr("v", np.int16, fill=-7)]))
    with tiledb.open(uri, "w", timestamp=10) as A:
        A[0:5] = np.arange(5, dtype=np.int16)
    with tiledb.open(uri, "w", timestamp=20) as A:
        A[3:4] = np.array([33], np.int16)
    with tiledb.open(uri, "w", timestamp=30) as A:
        A[8:10] = np.array([8, 9], np.int16)
    with tdbfs.open(uri) as array:
        table = array.cells(as_of=30)
        assert array.as_of(30).cells().equals(table)
    with tiledb.open(uri, timestamp=30) as A:
        want = A[0:10]["v"].tolist()
    assert table.column("d").to_pylist() == list(range(10))
    assert table.column("v").to_pylist() == want == [0, 1, 2, 33, 4, -7, -7, -7, 8, 9]
    t1 = [None if n is None else int(n.split("_")[2]) for n in table.column("fragment").to_pylist()]
    assert t1 == [10, 10, 10, 20, 10, None, None, None, 30, 30]
    assert [t is None for t in table.column("tile").to_pylist()] == [t is None for t in t1]
    r = run("export", "--as-of", 30, uri, "-")
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "d,v,fragment,tile" and lines[6] == "5,-7,," and lines[4].startswith("3,33,\"__20_20_")


def test_every_datetime_unit(base, tmp_path):
    """Each DATETIME_ unit as the Arrow type holding its values exactly: a day or longer as date32, an hour
    or a minute as timestamp[s], s/ms/us/ns as themselves, ps/fs/as (finer than Arrow goes) as the stored
    int64 with the unit in the field's metadata; before and after epoch. Parquet, which has no seconds,
    gives timestamp[ms] for the second."""
    uri = str(base / "datetimes")
    units = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
    dim = tiledb.Dim("d", domain=(0, 9), tile=5, dtype=np.int32)
    tiledb.Array.create(uri, tiledb.ArraySchema(tiledb.Domain(dim), sparse=True,
                                                attrs=[tiledb.Attr(f"t_{u}", dtype=f"datetime64[{u}]") for u in units]))
    with tiledb.open(uri, "w") as A:
        A[np.arange(4, dtype=np.int32)] = {f"t_{u}": (np.array([-3, 0, 1, 55]) * 7).astype(f"datetime64[{u}]")
                                           for u in units}
    with tiledb.open(uri) as A:
        got = A[:]
    with tdbfs.open(uri) as array:
        table = array.cells()
        array.export(tmp_path / "t.parquet")
    parquet = pq.read_table(tmp_path / "t.parquet")
    for u in units:
        values = got[f"t_{u}"]
        if u in ("Y", "M", "W", "D"):
            want = pa.array(values.astype("datetime64[D]"))
        elif u in ("h", "m", "s"):
            want = pa.array(values.astype("datetime64[s]"))
        elif u in ("ms", "us", "ns"):
            want = pa.array(values)
        else:
            want = pa.array(values.view(np.int64))
        column = table.column(f"t_{u}").combine_chunks()
        assert column.type == want.type and column.equals(want), (u, column, want)
        assert table.schema.field(f"t_{u}").metadata[b"tiledb_datatype"].startswith(b"DATETIME_")
        on_disk = parquet.column(f"t_{u}").combine_chunks()
        assert on_disk.equals(want if u not in ("h", "m", "s") else want.cast(pa.timestamp("ms"))), u
    assert str(table.schema.field("t_ps").metadata[b"tiledb_datatype"], "ascii") == "DATETIME_PS"


def test_encrypted_array(base, tmp_path):
    """An encrypted array exports with its key (--key-file), the same cells tiledb-py reads with it."""
    uri = str(base / "encrypted")
    h = histories.overlapping(uri, key=arrays.ENCRYPTION_KEY, evolve=False, deletes=False)
    key_file = tmp_path / "key"
    key_file.write_text(arrays.ENCRYPTION_KEY + "\n")
    t = h["times"][-1]
    out = tmp_path / "enc.parquet"
    r = run("export", "--as-of", t, "--key-file", key_file, uri, out)
    assert r.returncode == 0, r.stderr
    want = cells_reference.tiledb_rows(uri, t, key=arrays.ENCRYPTION_KEY)
    assert table_rows(pq.read_table(out)) == want and sum(want.values()) > 20
    r = run("export", "--as-of", t, uri, tmp_path / "nokey.csv")
    assert r.returncode != 0 and r.stderr.count(b"\n") == 1 and not (tmp_path / "nokey.csv").exists()


def test_groups_and_0x_arrays(tmp_path):
    """A group or a 0.x workspace has no cells of its own: one line, exit 2. A TileDB 0.x array exports
    one fragment's cells (--fragment, --subarray typed by its dimensions); what a read returns is computed
    for TileDB 2 arrays only, which a read without --fragment says."""
    group = str(tmp_path / "group")
    tiledb.Group.create(group)
    world = os.path.join(os.path.dirname(__file__), "data", "world", "GenomicsDB", "ws")
    for where in (group, world):
        r = run("export", where, tmp_path / "g.csv")
        assert r.returncode == 2 and b"holds no cells of its own" in r.stderr and r.stderr.count(b"\n") == 1
    array = os.path.join(world, "t0_1_2")
    r = run("export", array, "-")
    assert r.returncode == 2 and b"TileDB 0.x array" in r.stderr and r.stderr.count(b"\n") == 1
    frag = run("ls", array, "fragments").stdout.decode().split()[0].rstrip("/")
    shown = run("cat", array, f"fragments/{frag}/cells.csv").stdout.decode().splitlines()
    lines = run("export", "--fragment", frag, array, "-").stdout.decode().splitlines()
    assert lines[0] == shown[0] + ",fragment,tile" and len(lines) == len(shown) > 2
    assert [line.rsplit(",", 2)[0] for line in lines[1:]] == shown[1:]
    position = shown[0].split(",").index("position")
    lo = int(shown[1].split(",")[position])
    sub = run("export", "--fragment", frag, "--subarray", f"position={lo}..{lo}", array, "-").stdout.decode()
    assert [line.rsplit(",", 2)[0] for line in sub.splitlines()[1:]] == \
        [row for row in shown[1:] if int(row.split(",")[position]) == lo]


def test_damaged_tile_is_named_and_nothing_written(all_dtypes, tmp_path):
    import shutil
    copy = tmp_path / "damaged"
    shutil.copytree(all_dtypes, copy)
    frag = only_fragment(copy)
    data = copy / "__fragments" / frag / "a0.tdb"
    data.write_bytes(data.read_bytes()[:10])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for args in (["--fragment", frag], []):
        r = run("export", *args, copy, out_dir / "x.parquet")
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1, r.stderr
        assert r.stderr.startswith(b"tdbfs: error: cannot be read: ") and f"{frag}/a0.tdb".encode() in r.stderr
        assert os.listdir(out_dir) == []


def test_row_groups_as_batches_come(all_dtypes, tmp_path, monkeypatch):
    """Batches (here the fragment's tiles of 4, 4 and 3 cells) are gathered into row groups of at most
    ROW_GROUP_CELLS cells or ROW_GROUP_BYTES, each written as soon as it is full: never the whole array."""
    from tdbfs.library import export as export_module

    frag = only_fragment(all_dtypes)
    pf = pq.ParquetFile
    with tdbfs.open(all_dtypes) as array:
        sizes = {}
        for cells, nbytes in ((8, 1 << 30), (4, 1 << 30), (1000, 1)):
            monkeypatch.setattr(export_module, "ROW_GROUP_CELLS", cells)
            monkeypatch.setattr(export_module, "ROW_GROUP_BYTES", nbytes)
            out = tmp_path / f"{cells}_{nbytes}.parquet"
            array.export(out, fragment=frag)
            meta = pf(out).metadata
            sizes[cells, nbytes] = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            assert pq.read_table(out).equals(array.cells(fragment=frag))
    assert sizes == {(8, 1 << 30): [8, 3], (4, 1 << 30): [4, 4, 3], (1000, 1): [4, 4, 3]}
