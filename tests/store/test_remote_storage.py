"""The object-store backend against a real S3 server (moto): listings, stat, bounded reads, request economy,
the on-disk range cache and the deadline."""

from __future__ import annotations

import errno
import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from s3_server import BUCKET, S3Server  # noqa: E402

from tdbfs.store import fragment as fragment_module  # noqa: E402
from tdbfs.store.open_array import open_object  # noqa: E402
from tdbfs.store.storage import FOLDER, REGULAR, NotRegularError  # noqa: E402
from tdbfs.store.storage.opening import open_storage  # noqa: E402
from tdbfs.store.storage.remote import RemoteOpenError, RemoteSettings  # noqa: E402
from tdbfs.store.storage.retry import RemoteIOError  # noqa: E402
from tdbfs.views.nodes import walk  # noqa: E402
from tdbfs.views.tree import build_root  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    server = S3Server.start()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture(scope="module")
def objects(s3):
    """A few plain objects: files at two depths, one beside a folder of a similar name."""
    client = s3.client
    client.put_object(Bucket=BUCKET, Key="plain/data.bin", Body=bytes(range(256)) * 4)
    client.put_object(Bucket=BUCKET, Key="plain/dir/small", Body=b"hello")
    client.put_object(Bucket=BUCKET, Key="plain/dir/deeper/x", Body=b"x" * 10)
    client.put_object(Bucket=BUCKET, Key="plain/dirty", Body=b"")
    return "s3://" + BUCKET + "/plain"


@pytest.fixture(scope="module")
def dense_url(s3):
    url = f"s3://{BUCKET}/dense"
    ctx = s3.ctx()
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 999), tile=100, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=False,
                                attrs=[tiledb.Attr("a", dtype=np.int64, filters=[tiledb.ZstdFilter()])])
    tiledb.Array.create(url, schema, ctx=ctx)
    for start in (0, 500):
        with tiledb.open(url, "w", ctx=ctx) as arr:
            arr[start:start + 500] = np.arange(start, start + 500, dtype=np.int64)
    return url


def test_listing_synthesizes_folders_from_common_prefixes(objects):
    storage = open_storage(objects)
    assert storage.uri == objects
    entries = storage.entries("")
    assert [(e.name, e.kind, e.size) for e in entries] == [("data.bin", REGULAR, 1024), ("dir", FOLDER, 0),
                                                           ("dirty", REGULAR, 0)]
    assert all(e.mtime_ns > 0 for e in entries if e.is_file)
    assert storage.names("dir") == ["deeper", "small"]
    assert storage.subdirs("dir") == ["deeper"]
    assert storage.regular_names("dir") == ["small"]
    assert storage.entries("no-such-folder") == []
    assert storage.describe("dir/small") == objects + "/dir/small"


def test_stat_of_files_folders_and_what_is_not_there(objects):
    storage = open_storage(objects)
    assert storage.stat("dir/small").size == 5
    folder = storage.stat("dir")
    assert folder.is_dir
    # a folder's mtime is its newest object's, with its number of entries in the nanoseconds
    assert folder.mtime_ns == storage.stat("dir/small").mtime_ns + 2
    assert storage.stat("").is_dir
    with pytest.raises(FileNotFoundError):
        storage.stat("dir/none")
    with pytest.raises(FileNotFoundError):
        storage.stat("../dense")
    assert storage.entry("nothing") is None
    with pytest.raises(NotRegularError):
        storage.pread("dir", 0, 1)


def test_pread_is_bounded_by_the_listed_size(objects):
    storage = open_storage(objects)
    data = bytes(range(256)) * 4
    assert storage.pread("data.bin", 10, 20) == data[10:30]
    assert storage.pread("data.bin", 1000, 1 << 40) == data[1000:]   # a damaged length never sizes a request
    assert storage.pread("data.bin", 5000, 10) == b""
    assert storage.read("dir/small") == b"hello"
    assert storage.read("dirty") == b""
    child = storage.child("dir")
    assert child.uri == objects + "/dir" and child.read("deeper/x") == b"x" * 10


def test_each_read_is_one_get_and_each_listing_one_list(objects):
    storage = open_storage(objects)
    start = storage.counters.snapshot()
    storage.entries("dir")
    storage.pread("dir/small", 1, 3)
    storage.read("dir/small")
    storage.pread("dir/small", 5, 3)   # past the end: no request at all
    end = storage.counters.snapshot()
    assert (end.lists - start.lists, end.gets - start.gets, end.bytes_read - start.bytes_read) == (1, 2, 8)


def test_listings_are_fetched_again_after_the_ttl(s3, objects):
    storage = open_storage(objects, RemoteSettings(listing_ttl_s=3600))
    assert storage.names("dir") == ["deeper", "small"]
    s3.client.put_object(Bucket=BUCKET, Key="plain/dir/new", Body=b"n")
    try:
        assert storage.names("dir") == ["deeper", "small"]          # within the TTL: the listing kept
        assert open_storage(objects).names("dir") == ["deeper", "new", "small"]   # TTL 1 s, a fresh storage
    finally:
        s3.client.delete_object(Bucket=BUCKET, Key="plain/dir/new")


def test_missing_bucket_and_prefix(s3):
    with pytest.raises(RemoteOpenError, match="bucket not found: s3://no-such-bucket"):
        open_storage("s3://no-such-bucket/a")
    with pytest.raises(FileNotFoundError):
        open_storage(f"s3://{BUCKET}/no/such/prefix")


def test_first_footer_after_the_listing_costs_at_most_two_gets(dense_url):
    storage = open_storage(dense_url)
    root = build_root(open_object(storage))
    fragments = walk(root, "fragments")[0]
    names = sorted(fragments.children())
    assert len(names) == 2
    before = storage.counters.snapshot()
    footer = walk(root, f"fragments/{names[0]}/footer.yaml")[0]
    text = footer.read(0, footer.size())
    after = storage.counters.snapshot()
    assert bytes(text).startswith(b"version: 22\narray_schema_name: __")
    assert after.gets - before.gets <= 2


def test_a_footer_is_read_from_the_tail_of_its_file(dense_url, monkeypatch):
    """footer.yaml reads the end of `__fragment_metadata.tdb` alone, in one ranged GET, and shows what a
    read of the whole file shows."""
    whole_root = build_root(open_object(open_storage(dense_url)))
    name = sorted(walk(whole_root, "fragments")[0].children())[0]
    whole = walk(whole_root, f"fragments/{name}/footer.yaml")[0]
    expected = bytes(whole.read(0, whole.size()))
    footer_length = int(expected.split(b"footer_length: ")[1].split()[0])
    tail = footer_length + 8 + 16   # the footer, its length field and a few bytes before it

    monkeypatch.setattr(fragment_module, "FOOTER_TAIL", tail)
    storage = open_storage(dense_url)
    root = build_root(open_object(storage))
    md = storage.file_size(f"__fragments/{name}/__fragment_metadata.tdb")
    assert md > 2 * tail, "the metadata file must be longer than the tail for this test to mean anything"
    before = storage.counters.snapshot()
    footer = walk(root, f"fragments/{name}/footer.yaml")[0]
    assert bytes(footer.read(0, footer.size())) == expected
    after = storage.counters.snapshot()
    schema_size = sum(storage.file_size(f"__schema/{n}") for n in storage.regular_names("__schema"))
    assert after.gets - before.gets == 2                      # the tail, and the schema it names
    assert after.bytes_read - before.bytes_read == tail + schema_size


def test_tiles_match_tiledb_and_the_range_cache_serves_a_second_storage(dense_url, tmp_path):
    settings = RemoteSettings(cache_dir=str(tmp_path / "ranges"))
    first = open_storage(dense_url, settings)
    root = build_root(open_object(first))
    frag_name = sorted(walk(root, "fragments")[0].children())[0]
    tile = walk(root, f"fragments/{frag_name}/attrs/a0/tile_1.bin")[0]
    data = tile.read(0, tile.size())
    assert np.array_equal(np.frombuffer(data, dtype=np.int64), np.arange(100, 200))
    gets = first.counters.snapshot().gets
    assert gets >= 1
    cached = os.listdir(tmp_path / "ranges")
    assert cached
    # a second storage (a remount) reads the same ranges from disk, without a GET
    second = open_storage(dense_url, settings)
    root2 = build_root(open_object(second))
    tile2 = walk(root2, f"fragments/{frag_name}/attrs/a0/tile_1.bin")[0]
    assert tile2.read(0, tile2.size()) == data
    counts = second.counters.snapshot()
    assert counts.gets == 0 and counts.cache_hits >= 1


def test_a_stopped_server_gives_eio_naming_the_url_and_range_within_the_deadline():
    server = S3Server.start()
    try:
        server.client.put_object(Bucket=BUCKET, Key="gone/file", Body=b"0123456789")
        storage = open_storage(f"s3://{BUCKET}/gone", RemoteSettings(
            options={"s3": {"endpoint_url": server.endpoint, "key": "k", "secret": "s"}}, timeout_s=5,
            listing_ttl_s=3600))
        assert storage.pread("file", 2, 3) == b"234"
    finally:
        server.stop()
    with pytest.raises(RemoteIOError) as info:
        storage.pread("file", 4, 4)
    assert info.value.errno == errno.EIO
    assert f"s3://{BUCKET}/gone/file bytes 4-7" in str(info.value)
    assert "no answer within 5 s" in str(info.value)
    assert storage.names("") == ["file"]   # the listing already seen is still served


def test_check_reads_each_byte_at_most_once(s3, dense_url, capsys):
    from tdbfs.check.check import check_array
    from tdbfs.cli.check_command import _progress_bar

    storage = open_storage(dense_url)
    stored = sum(o["Size"] for page in s3.client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="dense/") for o in page.get("Contents", []))
    result = check_array(open_object(storage), _progress_bar(storage.counters))
    assert result.clean and result.counts["tiles"] == 10
    counts = storage.counters.snapshot()
    # every byte once, but for the 34-byte generic tile header of each fragment's metadata, which
    # ArrayStore.encryption_type reads on its own after the file was read whole
    assert stored <= counts.bytes_read <= stored + 34 * result.counts["fragments"]
    # one GET per tile and per small file read whole, no more
    assert counts.gets <= result.counts["tiles"] + result.counts["files"]
    shown = capsys.readouterr().err.rsplit("\r", 1)[-1]
    m = re.search(r"\] 6/6 (\d+\.\d) KiB in (\d+) requests done$", shown)
    assert m, shown
    assert m.group(1) == f"{counts.bytes_read / 1024:.1f}" and counts.gets < int(m.group(2)) <= counts.requests


def test_read_ahead_runs_requests_in_parallel_within_its_budget():
    import threading

    from tdbfs.store.storage.read_ahead import ReadAhead

    started: list = []
    at_barrier: list = []
    # the first three reads return only once all three are in flight together; the barrier's action records
    # what had been started then: the budget (3 ranges of 10 bytes) let no fourth one start
    barrier = threading.Barrier(3, action=lambda: at_barrier.append(list(started)), timeout=30)

    def fetch(item):
        started.append(item[0])
        if item[0] < 3:
            barrier.wait()
        return bytes([item[0]]) * item[1]

    ahead = ReadAhead(fetch)
    ahead.plan([(k, 10) for k in range(5)], budget=30)
    assert [ahead.take(k) for k in range(5)] == [bytes([k]) * 10 for k in range(5)]
    assert len(at_barrier) == 1 and sorted(at_barrier[0]) == [0, 1, 2]
    assert sorted(started) == [0, 1, 2, 3, 4]
    assert ahead.take(7) is None   # never planned: the reader reads it itself
