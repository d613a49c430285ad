"""`tdbfs salvage s3://...`: a source in S3 (a real moto server on loopback) gives the copy the same
objects on local disk give, and is only read."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

import arrays  # noqa: E402
from mounting import snapshot_tree, tdbfs_command  # noqa: E402
from test_salvage import fragment_names, rows, spoil_tile  # noqa: E402


def test_a_source_in_s3_gives_the_copy_its_local_twin_gives(s3, tmp_path):
    built = arrays.make_array(tmp_path / "built", "sparse", ndim=2, capacity=3, cells=10, filters="ZSTD")
    twin = shutil.copytree(built.path, tmp_path / "twin")
    spoil_tile(built.path, fragment_names(built.path)[0], "a0", 1)
    url = s3.upload(built.path, "damaged")
    env = dict(os.environ, **s3.env)
    remote = subprocess.run(tdbfs_command() + ["salvage", url, str(tmp_path / "from_s3")], capture_output=True,
                            text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)
    local = subprocess.run(tdbfs_command() + ["salvage", str(built.path), str(tmp_path / "from_disk")],
                           capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)
    assert remote.returncode == 1 == local.returncode, remote.stderr
    assert remote.stderr == "" and remote.stdout.startswith(f"{tmp_path / 'from_s3'}: ")
    assert remote.stdout.split(": ", 1)[1] == local.stdout.split(": ", 1)[1]
    mine, theirs = (yaml.safe_load((tmp_path / d / "salvage.yaml").read_text()) for d in ("from_s3", "from_disk"))
    assert mine["source"] == url
    for report in (mine, theirs):
        for key in ("source", "dest", "as_of"):
            report.pop(key)
        for f in report["fragments"]:
            f.pop("written", None)
            f["problems"] = [p.replace(url, "") for p in f.get("problems", ())]
    assert mine == theirs and mine["totals"]["tiles_lost"] == 1
    assert rows(tmp_path / "from_s3") == rows(tmp_path / "from_disk") != rows(twin)
    # only read: the objects are those uploaded
    back = s3.download("damaged", tmp_path / "back")
    strip = lambda snap: {k: v[:2] + v[4:] for k, v in snap.items() if v[0] == "file"}   # no mtimes
    assert strip(snapshot_tree(back)) == strip(snapshot_tree(built.path))
