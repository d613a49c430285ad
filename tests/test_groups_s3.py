"""A TileDB group in S3 (a real moto server on loopback, tests/s3_server.py), written there by
tiledb-py: members relative to it, an absolute member under another prefix, a nested group; the
oracle is tiledb-py's Group reading the same URL."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
import yaml

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

import groups  # noqa: E402
from mounting import mounted, tdbfs_command  # noqa: E402
from s3_server import BUCKET  # noqa: E402


def write_array(url: str, ctx, sparse: bool) -> None:
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 7), tile=4, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=sparse, attrs=[tiledb.Attr("a", dtype=np.int64)])
    tiledb.Array.create(url, schema, ctx=ctx)
    with tiledb.open(url, "w", ctx=ctx) as arr:
        if sparse:
            arr[np.array([1, 5], np.int32)] = np.array([10, 50])
        else:
            arr[:] = np.arange(8)


@pytest.fixture(scope="module")
def s3_group(s3):
    """s3://.../grp holding `a` (dense, relative), `sub` (a group holding sparse `b`) and `far`
    (sparse, absolute, under another prefix)."""
    ctx = s3.ctx()
    root, far = f"s3://{BUCKET}/grp", f"s3://{BUCKET}/elsewhere/far"
    tiledb.Group.create(root, ctx=ctx)
    tiledb.Group.create(f"{root}/sub", ctx=ctx)
    write_array(f"{root}/a", ctx, sparse=False)
    write_array(f"{root}/sub/b", ctx, sparse=True)
    write_array(far, ctx, sparse=True)
    with tiledb.Group(f"{root}/sub", "w", ctx=ctx) as g:
        g.add("b", name="b", relative=True)
    with tiledb.Group(root, "w", ctx=ctx) as g:
        g.add("a", name="a", relative=True)
        g.add("sub", name="sub", relative=True)
        g.add(far, name="far", relative=False)
        g.meta["where"] = "s3"
    return root, far


def oracle(url: str, ctx) -> list[tuple[str, str, str]]:
    with tiledb.Group(url, ctx=ctx) as g:
        return sorted((o.name, "group" if o.type is tiledb.Group else "array", o.uri.rstrip("/")) for o in g)


def cli(s3, *args) -> subprocess.CompletedProcess:
    return subprocess.run(tdbfs_command() + list(args), capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, **s3.env), stdin=subprocess.DEVNULL)


def test_group_yaml_at_every_level_is_what_tiledb_reads_from_the_bucket(s3, s3_group):
    root, far = s3_group
    ctx = s3.ctx()
    for url, path in ((root, "group.yaml"), (f"{root}/sub", "members/sub/group.yaml")):
        res = cli(s3, "cat", root, path)
        assert res.returncode == 0, res.stderr
        summary = yaml.safe_load(res.stdout)
        assert summary["uri"] == url and summary["problems"] == []
        assert sorted((m["name"], m["type"], m["location"]) for m in summary["members"]) == oracle(url, ctx)
    merged = yaml.safe_load(cli(s3, "cat", root, "metadata/merged.yaml").stdout)["metadata"]
    assert merged["where"]["value"] == "s3"
    assert cli(s3, "ls", root, "members/sub/members").stdout.split() == ["b/"]


def test_check_walks_every_member_in_the_bucket(s3, s3_group):
    root, far = s3_group
    res = cli(s3, "check", root)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["a", far, "sub/b", "sub", root]
    assert lines[-1].startswith(f"{root}: group of 3 members, clean")


def test_member_trees_through_the_group_are_the_arrays_mounted_alone(s3, s3_group):
    root, far = s3_group
    with mounted(root, env=s3.env) as mnt:
        for member, url in (("a", f"{root}/a"), ("far", far), ("sub/members/b", f"{root}/sub/b")):
            with mounted(url, env=s3.env) as alone:
                own = groups.walk_bytes(alone)
                assert "array.yaml" in own and len(own) > 10
                assert groups.walk_bytes(mnt / "members" / member) == own, member
