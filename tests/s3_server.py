"""A real S3 server on loopback for the tests: moto in server mode, one bucket, and how to reach it.

    server = S3Server.start()           # moto's server on a free port, bucket "tdbfs-test"
    server.env                          # AWS_* for tdbfs (endpoint, dummy keys, region)
    tiledb.Ctx(server.tiledb_config())  # tiledb-py writing into the same bucket
    server.client                       # a boto3 client: upload, download, damage
    server.stop()

moto keeps objects in memory, as S3 would: there are no folder objects, so TileDB writes no empty
`__commits/` markers, and a folder exists only where a key has it as prefix.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BUCKET = "tdbfs-test"
REGION = "us-east-1"
ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key-do-not-show"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"no server on port {port} after {timeout} s")


@dataclass
class S3Server:
    port: int
    server: subprocess.Popen

    log_path: Path | None = None

    @classmethod
    def start(cls, bucket: str | None = BUCKET, authenticating: bool = False,
              log_path: Path | None = None) -> "S3Server":
        """moto's server in a process of its own on a free port. Not its ThreadedMotoServer in this process:
        tiledb-py holds the GIL through a read query, so a server thread here could never answer it.
        `authenticating` (INITIAL_NO_AUTH_ACTION_COUNT=0) refuses every key its IAM was not given, as S3
        refuses a wrong key; it has no bucket. `log_path`: the server's access log (one line per request,
        `requests_since` counts them)."""
        port = free_port()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0") if authenticating else None
        if log_path is not None:
            env = dict(env or os.environ, PYTHONUNBUFFERED="1")
        log = open(log_path, "wb") if log_path is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                    env=env, stdout=log, stderr=log)
        finally:
            if log_path is not None:
                log.close()
        try:
            wait_for_port(port)
        except BaseException:
            proc.kill()
            raise
        s3 = cls(port, proc, log_path)
        if bucket and not authenticating:
            s3.client.create_bucket(Bucket=bucket)
        return s3

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What tdbfs needs to reach the server through the SDK's standard chain."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def tiledb_config(self) -> dict[str, str]:
        return {"vfs.s3.endpoint_override": f"127.0.0.1:{self.port}", "vfs.s3.scheme": "http",
                "vfs.s3.use_virtual_addressing": "false", "vfs.s3.region": REGION,
                "vfs.s3.aws_access_key_id": ACCESS_KEY, "vfs.s3.aws_secret_access_key": SECRET_KEY,
                # moto answers TileDB's parallel ranged reads slower than the 3 s TileDB allows by default
                "vfs.s3.request_timeout_ms": "60000"}

    def ctx(self):
        import tiledb
        return tiledb.Ctx(self.tiledb_config())

    @property
    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def keys(self, prefix: str, bucket: str = BUCKET) -> list[str]:
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def download(self, prefix: str, dest: Path, bucket: str = BUCKET) -> Path:
        """The objects under `prefix` as a local folder, byte for byte (the local copy a test compares with)."""
        client = self.client
        for key in self.keys(prefix.rstrip("/") + "/", bucket):
            target = dest / key[len(prefix.rstrip("/")) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        return dest

    def upload(self, folder: Path, prefix: str, bucket: str = BUCKET) -> str:
        """Every file under `folder` as an object under `prefix` (empty folders vanish, as on S3); its URL."""
        client = self.client
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder).as_posix()}",
                                  Body=path.read_bytes())
        return f"s3://{bucket}/{prefix}"

    def log_mark(self) -> int:
        """Where the access log ends once it has stopped growing (werkzeug writes a line after its answer)."""
        size, still = -1, 0
        while still < 3:
            time.sleep(0.05)
            now = os.path.getsize(self.log_path)
            still = still + 1 if now == size else 0
            size = now
        return size

    def requests_since(self, mark: int) -> dict[str, list[str]]:
        """{'LIST': [...], 'GET': [...], ...}: the paths of the requests logged since `mark`."""
        end = self.log_mark()
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read(end - mark).decode("utf-8", "replace"))
        out: dict = {}
        for method, target in re.findall(r'"([A-Z]+) (\S+) HTTP/[\d.]+" \d{3}', text):
            path = target.partition("?")[0].strip("/")
            out.setdefault("LIST" if method == "GET" and "/" not in path else method, []).append(target)
        return out

    def stop(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(10)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
