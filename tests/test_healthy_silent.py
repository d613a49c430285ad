"""Healthy means silent, as a rule over every healthy array the suite writes (tests/healthy.py): every
array.yaml, fragment.yaml, group.yaml and workspace.yaml of the tree (members' and every fragment's too)
says `problems: []` once the files of the tree were read, `tdbfs check` exits 0 and prints no warning
line, and the same holds through a real mount and in the object-store emulators. That a damaged copy is
still found is tests/test_damage.py's.

The view walk runs in this process (tdbfs/views/tree.py build_root, as `tdbfs cat` does), and so does
`tdbfs check` for every object (tdbfs.cli.main, printing what the command prints); the command itself runs
as a process for one object of each source, and a real mount for a few.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import healthy
from mounting import mounted, tdbfs_command
from tdbfs.frontend.common import open_store
from tdbfs.cli.main import main as tdbfs_main
from tdbfs.frontend.keys import key_from_environment
from tdbfs.views.nodes import DirNode, SymlinkNode, ViewError
from tdbfs.views.tree import build_root

#: the files whose `problems` list must be empty
SUMMARIES = ("array.yaml", "fragment.yaml", "group.yaml", "workspace.yaml")
#: views the walk leaves out: they render again what other views decode (cells of the tiles of attrs/ and
#: dims/, hex dumps of bytes layout/ maps) and would only make the walk slower
RENDERED_AGAIN = ("cells.csv", "cells", "hex")
#: one object of each source: `tdbfs check` as a process, and (MOUNTED) read through a real mount
AS_PROCESS = ("kinds/deletes_vacuumed", "encrypted/sparse", "history/sparse_full_everything", "filters/pipelines_0",
              "groups/nested/top", "groups/soma", "backcompat/v13", "legacy0x/ws")
MOUNTED = ("kinds/consolidated_sparse_vacuumed", "encrypted/dense", "groups/nested/top", "legacy0x/ws")
#: a summary line of `tdbfs check` that says nothing is wrong (a group prints one per member)
CLEAN_LINE = re.compile(r"(^|: |, )clean \(")


@pytest.fixture(scope="session")
def healthy_objects(tmp_path_factory) -> dict[str, healthy.Healthy]:
    return {h.name: h for h in healthy.build(tmp_path_factory.mktemp("healthy"))}


def _object(objects: dict, name: str) -> healthy.Healthy:
    if name not in objects:
        pytest.skip(f"{name} was not built here (its writer is missing)")
    return objects[name]


def walk_problems(h: healthy.Healthy) -> dict[str, list]:
    """Every file of the view read once (every tile decoded, every finding made), then each summary's
    problems: {view path: problems}; a folder or file that reads as an I/O error is one too."""
    root = build_root(open_store(h.location, 64, key=key_from_environment(h.env)))
    summaries, out = {}, {}
    todo = [("", root)]
    while todo:
        path, node = todo.pop()
        name = path.rsplit("/", 1)[-1]
        if isinstance(node, SymlinkNode) or name in RENDERED_AGAIN:
            continue   # a link's target is walked where it lives (a cycle of members is a link)
        if isinstance(node, DirNode):
            try:
                todo.extend((f"{path}/{n}".lstrip("/"), c) for n, c in sorted(node.children().items()))
            except ViewError as exc:
                out[path + "/"] = [f"EIO: {exc}"]
            continue
        if name in SUMMARIES:
            summaries[path] = node
        try:
            node.read(0, node.size())
        except ViewError as exc:
            out[path] = [f"EIO: {exc}"]
    assert summaries, f"{h.name}: no summary in the tree"
    for path, node in sorted(summaries.items()):
        problems = yaml.safe_load(node.read(0, node.size())).get("problems")
        if problems:
            out[path] = problems
    return out


def unclean_lines(status: int, output: str) -> list[str]:
    """What a silent check must not print: any line but a clean summary (a warning, an error, a traceback),
    or a status but 0."""
    return ([f"exit status {status}"] if status != 0 else []) + [
        line for line in output.splitlines() if not CLEAN_LINE.search(line)]


def test_every_summary_of_every_view_is_silent(healthy_objects):
    found = {}
    for h in healthy_objects.values():
        if h.local:
            problems = walk_problems(h)
            if problems:
                found[h.name] = problems
    assert not found, "false alarms in the views:\n" + yaml.safe_dump(found, width=200)


def test_check_is_silent(healthy_objects, monkeypatch):
    found = {}
    for h in healthy_objects.values():
        if not h.local:
            continue
        with monkeypatch.context() as env:
            for key, value in h.env.items():
                env.setenv(key, value)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                status = tdbfs_main(["check", h.location])
        bad = unclean_lines(status, printed.getvalue())
        if bad:
            found[h.name] = bad
    assert not found, "tdbfs check is not silent:\n" + yaml.safe_dump(found, width=200)


def check_command(location: str, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*tdbfs_command(), "check", *extra, location], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env}, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("name", AS_PROCESS)
def test_check_command_is_silent(healthy_objects, name):
    h = _object(healthy_objects, name)
    res = check_command(h.location, h.env)
    assert unclean_lines(res.returncode, res.stdout + res.stderr) == []
    assert res.stdout.rstrip().endswith(")") and h.location in res.stdout


def _read_tree(mnt: Path) -> list[Path]:
    """Read every file of the mount but the views RENDERED_AGAIN; the summaries found."""
    summaries = []
    for dirpath, dirnames, filenames in os.walk(mnt):
        dirnames[:] = [d for d in dirnames if d not in RENDERED_AGAIN and not os.path.islink(os.path.join(dirpath, d))]
        for f in filenames:
            p = Path(dirpath) / f
            if f in RENDERED_AGAIN or p.is_symlink():
                continue
            if f in SUMMARIES:
                summaries.append(p)
            p.read_bytes()   # an I/O error fails the test here
    return summaries


@pytest.mark.parametrize("name", MOUNTED)
def test_mounted_summaries_are_silent(healthy_objects, name):
    h = _object(healthy_objects, name)
    with mounted(h.location, env=h.env) as mnt:
        summaries = _read_tree(mnt)
        assert any(p.parent == mnt for p in summaries)
        found = {str(p.relative_to(mnt)): yaml.safe_load(p.read_bytes())["problems"] for p in summaries}
    assert {k: v for k, v in found.items() if v} == {}
    assert len(found) > 1, "fragments (or members) have summaries of their own"


# -- the object stores -------------------------------------------------------------------------------

def remote_summaries(url: str, env: dict, options=(), kind: str = "array") -> dict[str, list]:
    """problems of array.yaml and of every fragment's fragment.yaml (of a group: group.yaml, its members are
    `tdbfs check`'s), read with `tdbfs cat URL PATH`."""
    def cli(command, *args):
        res = subprocess.run([*tdbfs_command(), command, *options, *args], capture_output=True, text=True, timeout=300,
                             env={**os.environ, **env}, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, (args, res.stderr)
        return res.stdout
    if kind == "group":
        return {"group.yaml": yaml.safe_load(cli("cat", url, "group.yaml"))["problems"]}
    paths = ["array.yaml"] + [f"fragments/{f.rstrip('/')}/fragment.yaml" for f in cli("ls", url, "fragments").split()]
    return {p: yaml.safe_load(cli("cat", url, p))["problems"] for p in paths}


def _upload_and_check(emulator, objects: dict, options=()) -> None:
    found, uploaded = {}, []
    for name in healthy.REMOTE:
        if name not in objects:
            continue   # its writer is missing here
        h = objects[name]
        url = emulator.upload(Path(h.location), "healthy/" + name.replace("/", "_"))
        res = check_command(url, emulator.env, *options)
        bad = unclean_lines(res.returncode, res.stdout + res.stderr)
        summaries = {p: v for p, v in remote_summaries(url, emulator.env, options, h.kind).items() if v}
        if bad or summaries:
            found[name] = {"check": bad, "summaries": summaries}
        uploaded.append(name)
    assert found == {}
    assert len(uploaded) >= 2


def test_s3_arrays_are_silent(healthy_objects, s3):
    _upload_and_check(s3, healthy_objects)


def test_an_array_tiledb_wrote_into_s3_is_silent(s3):
    """Written, consolidated and vacuumed by TileDB itself in the bucket (no folder objects, no empty
    __commits/), not uploaded."""
    import numpy as np
    import tiledb
    from s3_server import BUCKET
    url = f"s3://{BUCKET}/healthy/written_by_tiledb"
    ctx = s3.ctx()
    dim = tiledb.Dim("d0", domain=(0, 99), tile=10, dtype=np.int32)
    tiledb.Array.create(url, tiledb.ArraySchema(domain=tiledb.Domain(dim), sparse=True, capacity=4,
                                                attrs=[tiledb.Attr("a0", dtype=np.int32)]), ctx=ctx)
    for k in range(3):
        with tiledb.open(url, "w", ctx=ctx) as A:
            A[np.arange(k * 10, k * 10 + 6, dtype=np.int32)] = {"a0": np.arange(6, dtype=np.int32) + k}
        with tiledb.open(url, "w", ctx=ctx) as A:
            A.meta[f"k{k}"] = k
    cfg = tiledb.Config({**s3.tiledb_config(), "sm.consolidation.buffer_size": "1000000"})
    tiledb.consolidate(url, config=cfg, ctx=ctx)
    tiledb.vacuum(url, ctx=ctx)
    res = check_command(url, s3.env)
    assert unclean_lines(res.returncode, res.stdout + res.stderr) == []
    summaries = remote_summaries(url, s3.env)
    assert len(summaries) == 2 and all(v == [] for v in summaries.values()), summaries


@pytest.mark.parametrize("which", ["gcs", "azure"])
def test_gcs_and_azure_arrays_are_silent(healthy_objects, which):
    from object_emulators import EMULATORS, EmulatorMissing
    try:
        emulator = EMULATORS[which].start()
    except EmulatorMissing as exc:
        pytest.skip(f"the {which} emulator cannot run here: {exc}")
    try:
        _upload_and_check(emulator, healthy_objects, emulator.options)
    finally:
        emulator.stop()


# -- false alarms found by the rule, each on its own --------------------------------------------------

def test_fragment_meta_naming_vacuumed_fragments_is_no_problem(array_factory):
    """Footers consolidated (mode fragment_meta), then the fragments consolidated and vacuumed: the
    __fragment_meta file still names the three vacuumed fragments, which TileDB skips; tdbfs says so in
    its view of the file, not among the problems."""
    built = array_factory("consolidated", sparse=True, vacuum_after=True, fragment_meta=True)
    root = build_root(open_store(str(built.path), 64))

    def read(path):
        node = root
        for part in path.split("/"):
            node = node.children()[part]
        return yaml.safe_load(node.read(0, node.size()))

    (meta,) = [n for n in root.children()["fragment_meta"].children() if n.endswith(".yaml")]
    view = read(f"fragment_meta/{meta}")
    assert read("array.yaml")["problems"] == []   # after the file was parsed
    assert view["not_in_array"] == 3 and [e["in_array"] for e in view["fragments"]] == [False] * 3
    live = [n.rstrip("/") for n in root.children()["fragments"].children()]
    assert len(live) == 1 and all(e["name"] not in live for e in view["fragments"])
    res = check_command(str(built.path), {})
    assert res.returncode == 0 and unclean_lines(0, res.stdout) == [], res.stdout


def test_a_removed_members_folder_is_no_stranger(tmp_path):
    """tiledb.Group.remove drops the member, never its folder: the folder is no problem (group.yaml's
    history names the removal); a folder that never was a member still is a warning."""
    import groups
    from tdbfs.store.open_array import open_array
    built = groups.build_nested(tmp_path)
    assert (built.path / "gone" / "__schema").is_dir()
    store = open_array(str(built.path))
    assert store.listing_findings() == []
    assert [m.uri for h in store.history() for m in h.removed] == ["gone"]
    groups.small_array(built.path / "stray", "dense")
    found = open_array(str(built.path)).listing_findings()
    assert [(p.file, p.message, p.severity) for p in found] == [
        ("stray", "folder present but not a member of the group", "warning")]
