"""Figure `remote`: `ls -l` of the root of an array of many fragments in S3, on a fresh mount.

The exact sizes of array.yaml, stats.csv, timeline.csv and fragments.svg need every fragment's footer:
`ls -l` of the root reads them all. The array lives in moto's S3 server on loopback (a process of its
own, started here); it is one fragment written by tiledb-py and copies of its objects under new
timestamped names, each with its commit (as scripts/bench_requests makes them). Each turn mounts the
s3:// URL afresh, runs `ls -l` on the root and checks that every size it shows is the number of bytes
`cat` then reads; the baseline, interleaved with it, is tiledb-py's FragmentInfoList of the same URI in
a fresh process (it reads every footer too). Wall seconds of each side, with CPU seconds beside them:
tdbfs's daemon, tiledb-py's process, and the S3 server's own (the server shares the machine's cores).
Requests are counted in the server's access log. Goal: under 3 s.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from bench_lib import ROOT, TDBFS, _daemon_pid, alive, fmt, interleaved, med, verdict

BUCKET = "bench"
REGION = "us-east-1"
KEY_ID, SECRET = "bench-access-key", "bench-secret-key"
GOAL_S = 3.0
_ACCESS = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+" \d{3}')
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")   # werkzeug colours its lines by status

INFO_LIST = """
import json, resource, sys, time, tiledb
url, port, key, secret, region = sys.argv[1:6]
ctx = tiledb.Ctx({"vfs.s3.endpoint_override": f"127.0.0.1:{port}", "vfs.s3.scheme": "http",
                  "vfs.s3.use_virtual_addressing": "false", "vfs.s3.region": region,
                  "vfs.s3.aws_access_key_id": key, "vfs.s3.aws_secret_access_key": secret,
                  "vfs.s3.request_timeout_ms": "60000"})
t = time.perf_counter(); c = time.process_time()
n = len(tiledb.FragmentInfoList(url, ctx=ctx))
print(json.dumps([time.perf_counter() - t, time.process_time() - c, n]))
"""


class _Server:
    """moto's S3 server in a process of its own on a free loopback port, its access log in a file."""

    def __init__(self, log_path: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("moto's server did not start (pip install 'moto[server]')")
            time.sleep(0.05)
        self.client.create_bucket(Bucket=BUCKET)

    @property
    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}", aws_access_key_id=KEY_ID,
                            aws_secret_access_key=SECRET, region_name=REGION)

    def env(self) -> dict:
        return dict(os.environ, PYTHONPATH=ROOT, AWS_ENDPOINT_URL=f"http://127.0.0.1:{self.port}",
                    AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET, AWS_DEFAULT_REGION=REGION,
                    AWS_EC2_METADATA_DISABLED="true")

    def ctx(self):
        import tiledb
        return tiledb.Ctx({"vfs.s3.endpoint_override": f"127.0.0.1:{self.port}", "vfs.s3.scheme": "http",
                           "vfs.s3.use_virtual_addressing": "false", "vfs.s3.region": REGION,
                           "vfs.s3.aws_access_key_id": KEY_ID, "vfs.s3.aws_secret_access_key": SECRET,
                           "vfs.s3.request_timeout_ms": "60000"})

    def cpu_s(self) -> float:
        return _cpu_s(self.proc.pid)

    def mark(self) -> int:
        size, still = -1, 0
        while still < 3:   # werkzeug writes its line after the answer
            time.sleep(0.05)
            now = os.path.getsize(self.log_path)
            still = still + 1 if now == size else 0
            size = now
        return size

    def requests_since(self, mark: int) -> int:
        end = self.mark()
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            return len(_ACCESS.findall(_COLOUR.sub("", f.read(end - mark).decode("utf-8", "replace"))))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _make_array(server: _Server, prefix: str, n: int) -> str:
    import numpy as np
    import tiledb
    url = f"s3://{BUCKET}/{prefix}"
    ctx = server.ctx()
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 1023), tile=64, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, sparse=False,
                                attrs=[tiledb.Attr("a", dtype=np.int32, filters=[tiledb.ZstdFilter()])])
    tiledb.Array.create(url, schema, ctx=ctx)
    with tiledb.open(url, "w", timestamp=1, ctx=ctx) as arr:
        arr[0:1024] = np.arange(1024, dtype=np.int32)
    client = server.client
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{prefix}/__fragments/") for o in page.get("Contents", [])]
    first = keys[0].split("/")[2]
    files = [k.split("/", 3)[3] for k in keys]
    base = 1_700_000_000_000   # 13-digit millisecond stamps, as TileDB names a write

    def copy(i: int) -> None:
        name = f"__{base + i}_{base + i}_{uuid.uuid4().hex}_{first.rsplit('_', 1)[1]}"
        for f in files:
            client.copy_object(Bucket=BUCKET, Key=f"{prefix}/__fragments/{name}/{f}",
                               CopySource={"Bucket": BUCKET, "Key": f"{prefix}/__fragments/{first}/{f}"})
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/__commits/{name}.wrt", Body=b"")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(copy, range(2, n + 1)))
    return url


def _umount(mnt: str, env: dict) -> None:
    try:
        pid = _daemon_pid(mnt)
    except RuntimeError:
        pid = None
    for _ in range(50):
        res = subprocess.run(TDBFS + ["umount", mnt], env=env, capture_output=True)
        if res.returncode == 0 or b"not mounted" in res.stderr:
            break
        time.sleep(0.1)
    else:
        subprocess.run(TDBFS + ["umount", "-z", mnt], env=env, capture_output=True)
    for _ in range(100):
        if pid is None or not alive(pid):
            break
        time.sleep(0.05)


def fig_remote(args, work, arrays, row) -> None:
    n = args.remote_fragments
    server = _Server(os.path.join(work, "moto-remote.log"))
    mnt = os.path.join(work, "mnt-remote")
    os.makedirs(mnt, exist_ok=True)
    env = server.env()
    try:
        t = time.perf_counter()
        url = _make_array(server, f"frags{n}", n)
        print(f"  made s3 frags{n} in {time.perf_counter() - t:.1f} s", flush=True)

        def tdbfs_ls():
            subprocess.run(TDBFS + ["mount", "--cache-mb", str(args.cache_mb), url, mnt], check=True, env=env,
                           capture_output=True)
            try:
                pid = _daemon_pid(mnt)
                mark, cpu0, srv0 = server.mark(), _cpu_s(pid), server.cpu_s()
                t0 = time.perf_counter()
                out = subprocess.run(["ls", "-l", "--time-style=+", mnt], check=True, capture_output=True,
                                     text=True).stdout
                wall = time.perf_counter() - t0
                cpu, srv = _cpu_s(pid) - cpu0, server.cpu_s() - srv0
                sent = server.requests_since(mark)
                sizes = {ln.split()[-1]: int(ln.split()[4]) for ln in out.splitlines()[1:]}
                for name in ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg"):
                    with open(os.path.join(mnt, name), "rb") as f:
                        got = len(f.read())
                    if got != sizes[name]:
                        raise AssertionError(f"ls -l shows {sizes[name]} bytes for {name}, cat reads {got}")
            finally:
                _umount(mnt, env)
            return wall, cpu, srv, sent

        def tiledb_info():
            mark, srv0 = server.mark(), server.cpu_s()
            res = subprocess.run([sys.executable, "-c", INFO_LIST, url, str(server.port), KEY_ID, SECRET, REGION],
                                 check=True, capture_output=True, text=True, env=env)
            wall, cpu, seen = eval(res.stdout.strip().splitlines()[-1])   # noqa: S307 -- our own json line
            if seen != n:
                raise AssertionError(f"tiledb-py sees {seen} fragments, not {n}")
            return wall, cpu, server.cpu_s() - srv0, server.requests_since(mark)

        runs = interleaved(args.repeat, {"tdbfs": tdbfs_ls, "tiledb": tiledb_info})
        ours, theirs = runs["tdbfs"], runs["tiledb"]
        wall = [r[0] for r in ours]
        base = [r[0] for r in theirs]
        row(11, f"`ls -l` of the root of {n} fragments in S3 (moto on loopback), fresh mount, s",
            f"{fmt(wall, digits=2)}; CPU daemon {fmt([r[1] for r in ours], digits=2)}, server "
            f"{fmt([r[2] for r in ours], digits=2)}; {med([r[3] for r in ours]):.0f} requests",
            f"tiledb-py FragmentInfoList {fmt(base, digits=2)}; CPU {fmt([r[1] for r in theirs], digits=2)}, server "
            f"{fmt([r[2] for r in theirs], digits=2)}; {med([r[3] for r in theirs]):.0f} requests",
            f"{med(wall) / med(base):.2f}", verdict(f"< {GOAL_S:g} s", med(wall) < GOAL_S))
    finally:
        if os.path.ismount(mnt):
            _umount(mnt, env)
        server.stop()
