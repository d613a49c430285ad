"""tdbfs.open and the tdbfs fsspec protocol on arrays and a group in S3 (a real moto server on loopback,
tests/s3_server.py): the same comparisons as on a local disk, `tdbfs check --json` run against the
bucket, and pandas reading cells.csv and stats.csv through `tdbfs::s3://...` as a mount reads them."""

from __future__ import annotations

import io

import numpy as np
import pytest

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")
fsspec = pytest.importorskip("fsspec")
pandas = pytest.importorskip("pandas")

import arrays  # noqa: E402
import library_oracle as oracle  # noqa: E402
from mounting import mounted  # noqa: E402
from s3_server import ACCESS_KEY, BUCKET, REGION, SECRET_KEY  # noqa: E402

import tdbfs  # noqa: E402


def options(s3) -> dict:
    """s3fs's options for the moto server: what a user passes as storage_options."""
    return {"endpoint_url": s3.endpoint, "key": ACCESS_KEY, "secret": SECRET_KEY,
            "client_kwargs": {"region_name": REGION}}


def pandas_url(url: str) -> str:
    """pandas before 3.0 takes no `a::b://` string for a URL (pandas issue 48978); `a://::b://` is the
    same chain to fsspec."""
    major = int(pandas.__version__.split(".")[0])
    return url if major >= 3 else url.replace("tdbfs::", "tdbfs://::", 1)


@pytest.fixture(scope="module")
def bucket_arrays(s3, tmp_path_factory):
    """name -> (local folder, its copy in the bucket): sparse with every datatype, dense 2-D."""
    base = tmp_path_factory.mktemp("s3_library")
    out = {}
    for name, (kind, opts) in {"sparse": ("all_dtypes", dict(sparse=True)), "dense": ("dense", dict(ndim=2))}.items():
        built = arrays.make_array(base, kind, name=name, **opts)
        out[name] = (built.path, s3.upload(built.path, f"library/{name}"))
    return out


@pytest.fixture(autouse=True)
def _protocol():
    # registered as the installed entry point registers it (test_library_fsspec checks the entry point)
    fsspec.register_implementation("tdbfs", "tdbfs.library.filesystem.TdbfsFileSystem", clobber=True)


@pytest.mark.parametrize("name", ["sparse", "dense"])
def test_array_in_the_bucket_is_what_tiledb_reads_there(s3, bucket_arrays, name):
    local, url = bucket_arrays[name]
    with tdbfs.open(url, storage_options=options(s3)) as array, tdbfs.open(local) as here:
        assert array.uri == url and isinstance(array, tdbfs.Array)
        assert oracle.assert_fragments_match_tiledb(array, url, s3.ctx()) >= 1
        for frag in array.fragments:
            assert oracle.assert_tiles_are_the_tree_files(array, frag)
            assert oracle.assert_cells_are_cells_csv(array, frag)
            twin = here.fragments[frag.name]
            for field in frag.fields:
                for k in range(frag.tile_count):
                    assert frag.tile_bytes(field.name, k) == twin.tile_bytes(field.name, k)
        if name == "sparse":   # one fragment: its tiles, one after the other, are tiledb-py's cells in stored order
            frag = array.fragments[0]
            with tiledb.open(url, ctx=s3.ctx()) as A:
                stored = A.query(order="G")[:]
            for field in frag.fields:
                if field.kind == "attribute" and not field.var_sized and not field.nullable:
                    ours = np.concatenate([frag.tile(field.name, k) for k in range(frag.tile_count)])
                    assert ours.tobytes() == np.ascontiguousarray(stored[field.name]).tobytes(), field.name
        assert oracle.check_document(array.check()) == oracle.cli_check_json(url, env=s3.env)


def test_pandas_reads_cells_and_stats_through_tdbfs_chained_to_s3(s3, bucket_arrays):
    _, url = bucket_arrays["sparse"]
    so = {"s3": options(s3)}
    with tdbfs.open(url, storage_options=options(s3)) as array, mounted(url, env=s3.env) as mnt:
        frag = array.fragments[0].name
        for path in (f"fragments/{frag}/cells.csv", "stats.csv", f"fragments/{frag}/stats.csv"):
            on_mount = (mnt / path).read_bytes()
            chained = f"tdbfs::{url}/{path}"
            with fsspec.open(chained, **so) as f:
                assert f.read() == on_mount, path
            read = pandas.read_csv(pandas_url(chained), storage_options=so)
            pandas.testing.assert_frame_equal(read, pandas.read_csv(io.BytesIO(on_mount)))
            assert len(read) > 0
        fs = fsspec.filesystem("tdbfs", location=url, s3=options(s3))
        listed = {e["name"]: e for e in fs.ls(f"fragments/{frag}")}
        assert set(listed) == {f"fragments/{frag}/{n.name}" for n in (mnt / "fragments" / frag).iterdir()}
        cells = f"fragments/{frag}/cells.csv"
        assert listed[cells]["size"] == (mnt / cells).stat().st_size
        with fs.open(cells) as f:   # ranged reads
            f.seek(10)
            assert f.read(50) == (mnt / cells).read_bytes()[10:60]


def test_group_in_the_bucket_opens_each_member(s3):
    ctx = s3.ctx()
    root = f"s3://{BUCKET}/library_group"
    tiledb.Group.create(root, ctx=ctx)
    tiledb.Group.create(f"{root}/sub", ctx=ctx)
    for uri, sparse in ((f"{root}/a", False), (f"{root}/sub/b", True)):
        dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 7), tile=4, dtype=np.int32))
        tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=sparse, attrs=[tiledb.Attr("a", dtype=np.int64)]),
                            ctx=ctx)
        with tiledb.open(uri, "w", ctx=ctx) as A:
            if sparse:
                A[np.array([1, 5], np.int32)] = np.array([10, 50])
            else:
                A[:] = np.arange(8)
    with tiledb.Group(f"{root}/sub", "w", ctx=ctx) as g:
        g.add("b", name="b", relative=True)
    with tiledb.Group(root, "w", ctx=ctx) as g:
        g.add("a", name="a", relative=True)
        g.add("sub", name="sub", relative=True)
    with tdbfs.open(root, storage_options=options(s3)) as group:
        assert isinstance(group, tdbfs.Group)
        assert [(m.name, m.type, m.location) for m in group.members] == [
            ("a", "array", f"{root}/a"), ("sub", "group", f"{root}/sub")]
        a = group["a"]
        assert oracle.assert_fragments_match_tiledb(a, f"{root}/a", ctx) == 1
        assert a.fragments[0].tile("a", 1).tolist() == [4, 5, 6, 7]
        b = group["sub"]["b"]
        assert oracle.assert_fragments_match_tiledb(b, f"{root}/sub/b", ctx) == 1
        assert b.fragments[0].cells() and b.fragments[0].cells()["a"].tolist() == [10, 50]
        # before check(): it marks the group's stores checked (array.yaml's `checked:`), a fresh open does not
        with fsspec.open(f"tdbfs::{root}/members/sub/members/b/array.yaml", s3=options(s3)) as f:
            assert f.read() == b.open_view("array.yaml") == group.open_view("members/sub/members/b/array.yaml")
        assert oracle.check_document(group.check()) == oracle.cli_check_json(root, env=s3.env)
