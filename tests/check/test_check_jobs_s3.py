"""`tdbfs check --jobs N` on S3 (a real moto server on loopback): every worker opens the URL itself
with the same backend settings, and the report is the same as `--jobs 1`, whole fragments or split
into tile ranges."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

import arrays  # noqa: E402
from mounting import tdbfs_command  # noqa: E402
from test_check_jobs import _report  # noqa: E402

from tdbfs.check.check import check_array  # noqa: E402
from tdbfs.check.pool import ProcessPool  # noqa: E402
from tdbfs.check.work import MIN_WORKER_CACHE_MB, StoreSpec, new_run  # noqa: E402
from tdbfs.frontend.common import open_store  # noqa: E402


@pytest.fixture(scope="module")
def damaged_url(s3, tmp_path_factory):
    """A sparse array with a flipped byte in a tile and a stray file, uploaded."""
    base = tmp_path_factory.mktemp("jobs_s3")
    built = arrays.make_array(base, "sparse", ndim=1, cells=10, capacity=3, n_fragments=3)
    damaged = shutil.copytree(built.path, base / "damaged")
    target = sorted((damaged / "__fragments").iterdir())[1] / "a0.tdb"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    (damaged / "__fragments" / "stray.txt").write_bytes(b"not TileDB's")
    return s3.upload(damaged, "jobs_damaged")


def _cli(s3, *args):
    return subprocess.run(tdbfs_command() + ["check", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **s3.env), stdin=subprocess.DEVNULL)


def test_cli_over_s3_is_the_same_for_any_jobs(s3, damaged_url):
    one, two = _cli(s3, "-j", 1, damaged_url), _cli(s3, "-j", 2, damaged_url)
    assert one.returncode == two.returncode == 1
    assert two.stdout == one.stdout and "a0.tdb" in one.stdout and "stray.txt" in one.stdout
    one, three = _cli(s3, "--json", "-j", 1, damaged_url), _cli(s3, "--json", "-j", 3, damaged_url)
    assert three.stdout == one.stdout and json.loads(one.stdout)["counts"]["fragments"] == 3


def test_split_into_tile_ranges_over_s3_is_the_same(s3, damaged_url, monkeypatch):
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    one = _report(check_array(open_store(damaged_url, 64)))
    with ProcessPool(2) as pool:
        spec = StoreSpec(damaged_url, MIN_WORKER_CACHE_MB, run=new_run())
        split = _report(check_array(open_store(damaged_url, 64), None, pool, spec, 1))
    assert split == one and "a0.tdb" in one
