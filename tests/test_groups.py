"""Groups end to end, through a real FUSE mount read with real tools and through the CLI: what
tdbfs shows of every group equals what tiledb-py's Group API reads; every member array's tree
through the group is byte for byte the tree of that array mounted on its own; a TileDB-SOMA
experiment written by tiledbsoma; removed, missing and outside members; a cycle; damage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

import groups
from mounting import tdbfs_command


def run(*args, check=True) -> subprocess.CompletedProcess:
    res = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    if check:
        assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res


def cli(*args, check=True) -> subprocess.CompletedProcess:
    return run(*tdbfs_command(), *args, check=check)


def read_yaml(path) -> dict:
    return yaml.safe_load(run("cat", str(path)).stdout)


def plain(value):
    return list(value) if isinstance(value, tuple) else value


def assert_groups_match_tiledb(mnt, built: groups.BuiltGroup) -> None:
    """group.yaml and metadata/merged.yaml at every level of the mount against tiledb-py."""
    for member_path, folder in built.groups.items():
        where = mnt.joinpath(*[p for part in member_path.split("/") if part for p in ("members", part)])
        summary = read_yaml(where / "group.yaml")
        assert summary["kind"] == "group" and summary["uri"] == str(folder)
        got = sorted((m["name"], m["type"], m["location"]) for m in summary["members"])
        assert got == groups.oracle_members(folder), member_path
        listed = run("ls", str(where / "members")).stdout.split()
        assert sorted(listed) == sorted(m["name"] for m in summary["members"])
        merged = read_yaml(where / "metadata" / "merged.yaml")["metadata"]
        want = groups.oracle_metadata(folder)
        assert {k: plain(v["value"]) for k, v in merged.items()} == {k: plain(v) for k, v in want.items()}


def assert_member_trees_identical(mount, mnt, built: groups.BuiltGroup) -> None:
    """Each member array's tree in the group mount is its own mount's, byte for byte."""
    for member_path, folder in built.arrays.items():
        inside = mnt.joinpath(*[p for part in member_path.split("/") for p in ("members", part)])
        alone = mount(folder, extra_args=NO_BACKGROUND_CHECK)
        via_group, own = groups.walk_bytes(inside), groups.walk_bytes(alone)
        assert len(own) > 10 and "array.yaml" in own
        assert via_group.keys() == own.keys(), member_path
        differ = [k for k in own if own[k] != via_group[k]]
        assert not differ, (member_path, differ[:5])


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    return groups.build_nested(tmp_path_factory.mktemp("nested"))


#: array.yaml says how far the mount's background check has got (`checked:`), which two mounts reach at
#: their own pace: off where two mounts' trees are compared byte for byte
NO_BACKGROUND_CHECK = ["-o", "check=off"]


def test_nested_groups_show_what_tiledb_reads_and_each_array_as_mounted_alone(nested, mount):
    mnt = mount(nested.path, extra_args=NO_BACKGROUND_CHECK)
    assert run("ls", str(mnt)).stdout.split() == ["README.txt", "group.yaml", "group_details", "members",
                                                  "metadata"]
    assert "members/<name>/" in run("cat", str(mnt / "README.txt")).stdout
    assert_groups_match_tiledb(mnt, nested)
    assert_member_trees_identical(mount, mnt, nested)


def test_history_removed_member_and_details_files_with_their_byte_maps(nested, mount):
    mnt = mount(nested.path)
    summary = read_yaml(mnt / "group.yaml")
    assert [[m["name"] for m in h["removed"]] for h in summary["history"]] == [[], [], ["gone"]]
    assert "gone" not in run("ls", str(mnt / "members")).stdout.split()
    assert summary["problems"] == []   # TileDB keeps a removed member's folder; the history names it
    names = [f.name for f in groups.details_files(nested.path)]
    assert sorted(os.listdir(mnt / "group_details")) == sorted([n + ".yaml" for n in names] + ["hex", "layout"])
    last = read_yaml(mnt / "group_details" / (names[-1] + ".yaml"))
    assert [(m["name"], m["deleted"]) for m in last["members"] if m["name"] == "gone"] == [("gone", True)]
    rows = run("cat", str(mnt / "group_details" / "layout" / (names[-1] + ".csv"))).stdout.splitlines()
    size = (nested.path / "__group" / names[-1]).stat().st_size
    assert rows[0] == "file,start,end,length,structure,detail"
    spans = [tuple(int(x) for x in row.split(",")[1:3]) for row in rows[1:]]
    assert spans[0][0] == 0 and spans[-1][1] == size and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert "removed 'gone' (array, relative 'gone')" in "\n".join(rows)
    dump = run("cat", str(mnt / "group_details" / "hex" / (names[-1] + ".txt"))).stdout
    assert dump.splitlines()[0].endswith(f"group details, bytes 0-{size} ({size} bytes)")
    hits = run("grep", "-rl", "top group, renamed", str(mnt / "metadata")).stdout.split()
    assert any(h.endswith("merged.yaml") for h in hits)


def test_a_soma_experiment_written_by_tiledbsoma(tmp_path, mount):
    pytest.importorskip("tiledbsoma", reason="tiledbsoma is in the test extra (pyproject.toml)")
    built = groups.build_soma(tmp_path / "experiment")
    mnt = mount(built.path, extra_args=NO_BACKGROUND_CHECK)
    assert_groups_match_tiledb(mnt, built)
    assert run("ls", str(mnt / "members" / "ms" / "members" / "RNA" / "members")).stdout.split() == ["X", "var"]
    assert_member_trees_identical(mount, mnt, built)
    res = cli("check", str(built.path))
    lines = res.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["ms/RNA/X/data", "ms/RNA/X", "ms/RNA/var", "ms/RNA", "ms",
                                                       "obs", str(built.path)]
    assert lines[-1].startswith(f"{built.path}: group of 2 members, clean")


def test_a_cycle_is_a_link_and_walks_end(tmp_path, mount):
    built = groups.build_cycle(tmp_path)
    mnt = mount(built.path)
    link = mnt / "members" / "b" / "members" / "up"
    assert os.path.islink(link) and os.readlink(link) == "../../.."
    assert os.path.samefile(link, mnt)       # the kernel follows it to the group's own folder
    walked = groups.walk_bytes(mnt)
    assert walked["members/b/members/up"] == ("link", "../../..")
    assert "members/x/array.yaml" in walked
    assert read_yaml(mnt / "members" / "b" / "group.yaml")["members"][0]["location"] == str(built.path)


def test_missing_member_and_damaged_details_file_never_hide_the_rest(nested, tmp_path, mount):
    top = tmp_path / "top"
    shutil.copytree(nested.path, top)
    shutil.copytree(nested.arrays["ext"], tmp_path / "ext_copy")
    shutil.rmtree(top / "s")
    mid_details = groups.details_files(top / "mid")[-1]
    mid_details.write_bytes(mid_details.read_bytes()[:40])      # cut inside the tile's header pipeline
    mnt = mount(top)
    assert sorted(os.listdir(mnt / "members")) == ["d", "ext", "mid", "s"]
    assert os.listdir(mnt / "members" / "s") == ["problem.yaml"]
    shown = read_yaml(mnt / "members" / "s" / "problem.yaml")
    assert shown["member"] == {"name": "s", "type": "array", "uri": "s", "relative": True,
                               "location": str(top / "s")}
    assert "member missing" in shown["problem"]["message"] and shown["problem"]["offset"] is not None
    assert shown["problem"] in read_yaml(mnt / "group.yaml")["problems"]
    assert "array.yaml" in os.listdir(mnt / "members" / "d")
    # the damaged details file of mid/: a problem with file and offset, the file's view EIO, the rest served
    mid = mnt / "members" / "mid"
    rel = f"__group/{mid_details.name}"
    problems = [p for p in read_yaml(mid / "group.yaml")["problems"] if p["file"] == rel]
    assert problems and problems[0]["offset"] is not None
    res = run("cat", str(mid / "group_details" / (mid_details.name + ".yaml")), check=False)
    assert res.returncode != 0 and "Input/output error" in res.stderr
    rows = run("cat", str(mid / "group_details" / "layout" / (mid_details.name + ".csv"))).stdout
    assert "undecodable" in rows
    assert "README.txt" in os.listdir(mid)
    res = cli("check", str(top), check=False)
    assert res.returncode == 1
    assert any(line.startswith(f"mid/{rel}:") for line in res.stdout.splitlines()), res.stdout
    assert any("member missing" in line for line in res.stdout.splitlines())
    assert "d: clean" in res.stdout


def test_cli_ls_cat_tree_and_check_json(nested):
    assert cli("ls", str(nested.path), "members").stdout.split() == ["d/", "ext/", "mid/", "s/"]
    assert cli("cat", str(nested.path), "members/mid/members/leaf/group.yaml").stdout == \
        cli("cat", str(nested.path / "mid" / "leaf"), "group.yaml").stdout
    tree = cli("tree", str(nested.path)).stdout
    assert "members/" in tree and "leaf/" in tree and "footer.yaml" in tree
    doc = json.loads(cli("check", "--json", str(nested.path)).stdout)
    assert doc["clean"] and doc["warnings"] == 0 and doc["counts"]["members"] == 4   # "gone" was removed
    assert sorted(m["array"] for m in doc["members"]) == sorted(["d", "mid", "s", str(nested.arrays["ext"])])
    mid = next(m for m in doc["members"] if m["array"] == "mid")
    assert sorted(m["array"] for m in mid["members"]) == ["mid/leaf", "mid/s2"]
