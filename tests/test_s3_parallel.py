"""Many fragments in S3 (a real moto server on loopback): listings from one LIST of `__fragments/`, footers
read ahead in parallel for the summaries, every size exact, and one footer that cannot be read is that
fragment's problem alone. Requests are counted in the server's own access log, or by the storage."""

from __future__ import annotations

import http.client
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import yaml

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from mounting import mounted  # noqa: E402
from s3_server import BUCKET, S3Server  # noqa: E402

from tdbfs.store.open_array import open_object  # noqa: E402
from tdbfs.store.storage.opening import open_storage  # noqa: E402
from tdbfs.store.storage.remote import RemoteSettings  # noqa: E402
from tdbfs.views.nodes import walk  # noqa: E402
from tdbfs.views.tree import build_root  # noqa: E402

#: fragments of the array: enough that one request after another would show, few enough to copy quickly
FRAGMENTS = 40
#: a listing trusted for the whole test: counts do not depend on how fast the machine is
LONG_TTL = ["-o", "entry_timeout=60"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s3 = S3Server.start(log_path=tmp_path_factory.mktemp("moto") / "access.log")
    saved = {k: os.environ.get(k) for k in s3.env}
    os.environ.update(s3.env)
    yield s3
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    s3.stop()


def many_fragments(s3, prefix: str, n: int) -> str:
    """n fragments: one written by tiledb-py, the others copies of its objects (format 22 fragments do not
    name themselves inside) under new timestamped names, each with its commit file."""
    url = f"s3://{BUCKET}/{prefix}"
    ctx = s3.ctx()
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 255), tile=64, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, sparse=False,
                                attrs=[tiledb.Attr("a", dtype=np.int32, filters=[tiledb.ZstdFilter()])])
    tiledb.Array.create(url, schema, ctx=ctx)
    with tiledb.open(url, "w", timestamp=1, ctx=ctx) as arr:
        arr[0:256] = np.arange(256, dtype=np.int32)
    client = s3.client
    keys = s3.keys(f"{prefix}/__fragments/")
    first = keys[0].split("/")[2]
    files = [k.split("/", 3)[3] for k in keys]

    def copy(i: int) -> None:
        name = f"__{i}_{i}_{uuid.uuid4().hex}_{first.rsplit('_', 1)[1]}"
        for f in files:
            client.copy_object(Bucket=BUCKET, Key=f"{prefix}/__fragments/{name}/{f}",
                               CopySource={"Bucket": BUCKET, "Key": f"{prefix}/__fragments/{first}/{f}"})
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/__commits/{name}.wrt", Body=b"")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(copy, range(2, n + 1)))
    assert len(tiledb.FragmentInfoList(url, ctx=s3.ctx())) == n
    return url


@pytest.fixture(scope="module")
def many(server):
    return many_fragments(server, "many", FRAGMENTS)


def test_first_footer_after_ls_costs_at_most_two_requests(server, many):
    """`ls fragments/` lists every fragment's files at once: the first footer.yaml is its ranged GET and the
    schema's, and no LIST."""
    with mounted(many, extra_args=LONG_TTL) as mnt:
        names = sorted(os.listdir(mnt / "fragments"))
        assert len(names) == FRAGMENTS
        mark = server.log_mark()
        footer = (mnt / "fragments" / names[FRAGMENTS // 2] / "footer.yaml").read_bytes()
        sent = server.requests_since(mark)
    assert footer.startswith(b"version: 22\narray_schema_name: __")
    assert sum(map(len, sent.values())) <= 2, sent
    assert sent.get("LIST") is None, sent
    assert any("__fragment_metadata.tdb" in p for p in sent["GET"]), sent


def test_ls_l_of_the_root_gives_exact_sizes_with_one_get_per_footer(server, many):
    """`ls -l` of the root needs every footer (array.yaml's exact size): one GET each, a few LISTs for the
    whole array, and the sizes are those of what `cat` reads."""
    with mounted(many, extra_args=LONG_TTL) as mnt:
        mark = server.log_mark()
        sizes = {name: os.lstat(mnt / name).st_size for name in os.listdir(mnt)}
        sent = server.requests_since(mark)
        for name in ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg"):
            data = (mnt / name).read_bytes()
            assert sizes[name] == len(data) > 0, name
        summary = yaml.safe_load((mnt / "array.yaml").read_bytes())
        stats = (mnt / "stats.csv").read_text().splitlines()
    assert summary["counts"]["fragments"] == FRAGMENTS and summary["problems"] == []
    assert sum(1 for row in stats if row.startswith("field,")) == FRAGMENTS
    footers = [p for p in sent.get("GET", ()) if p.endswith("__fragment_metadata.tdb")]
    assert len(footers) == FRAGMENTS == len(set(footers)), sent
    assert len(sent.get("GET", ())) <= FRAGMENTS + 3, sent      # and the schema
    assert len(sent.get("LIST", ())) <= 8, sent                  # the array's folders, not one per fragment


def test_the_summaries_read_footers_in_parallel(server, many):
    storage = open_storage(many, RemoteSettings(listing_ttl_s=60, requests=8))
    root = build_root(open_object(storage))
    before = storage.counters.snapshot()
    size = walk(root, "stats.csv")[0].size()
    after = storage.counters.snapshot()
    assert size > 0
    assert after.gets - before.gets <= FRAGMENTS + 2
    assert after.lists - before.lists <= 6
    assert after.most_in_flight > 1


class _FailingProxy:
    """A proxy in front of the server that answers 500 to every GET of one object, as a store that keeps
    failing one request would."""

    def __init__(self, upstream_port: int, failing: str):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "GET" and self.path.partition("?")[0].endswith(failing):
                    outer.refused += 1
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                conn.request(self.command, self.path, body=body or None,
                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self.refused = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_footer_that_cannot_be_read_is_that_fragments_problem_alone(server, many):
    names = sorted(k.split("/")[2] for k in server.keys("many/__fragments/") if k.endswith("__fragment_metadata.tdb"))
    bad = names[FRAGMENTS // 3]
    proxy = _FailingProxy(server.port, f"{bad}/__fragment_metadata.tdb")
    try:
        settings = RemoteSettings(options={"s3": {"endpoint_url": f"http://127.0.0.1:{proxy.port}"}},
                                  listing_ttl_s=60, timeout_s=4.0, requests=8)
        root = build_root(open_object(open_storage(many, settings)))
        summary = yaml.safe_load(bytes(walk(root, "array.yaml")[0].read(0, 1 << 20)))
        stats = bytes(walk(root, "stats.csv")[0].read(0, 1 << 20)).decode().splitlines()
    finally:
        proxy.stop()
    assert proxy.refused >= 2   # retried up to the deadline
    problems = summary["problems"]
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem["file"] == f"__fragments/{bad}/__fragment_metadata.tdb"
    assert f"s3://{BUCKET}/many/__fragments/{bad}/__fragment_metadata.tdb bytes 0-" in problem["message"]
    rows = [row for row in stats if row.startswith("field,")]
    assert len(rows) == FRAGMENTS   # the one that failed shows its error, the others their numbers
    (failed,) = [row for row in rows if bad in row]
    assert "no answer within" in failed   # its error column says why it has no numbers
    assert sum(1 for row in rows if row.split(",")[-1] == "") == FRAGMENTS - 1
