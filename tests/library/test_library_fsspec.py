"""The `tdbfs` fsspec protocol on a local array and group: the same tree as the mount (names, exact
sizes, bytes, ranged reads), pandas through it, read-only; registered by the `fsspec.specs` entry point."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

fsspec = pytest.importorskip("fsspec")
pandas = pytest.importorskip("pandas")
pytest.importorskip("tiledb")

import arrays  # noqa: E402
import groups  # noqa: E402
from mounting import mounted  # noqa: E402

import tdbfs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def pandas_url(url: str) -> str:
    """pandas before 3.0 takes no `a::b` string for a URL (pandas issue 48978); `a://::b` is the same chain."""
    return url if int(pandas.__version__.split(".")[0]) >= 3 else url.replace("tdbfs::", "tdbfs://::", 1)


@pytest.fixture(autouse=True)
def _protocol():
    fsspec.register_implementation("tdbfs", "tdbfs.library.filesystem.TdbfsFileSystem", clobber=True)


@pytest.fixture(scope="module")
def array_path(tmp_path_factory):
    return arrays.make_array(tmp_path_factory.mktemp("fsspec_arrays"), "consolidated", sparse=True).path


def test_every_file_has_the_mount_s_name_size_and_bytes(array_path):
    fs = fsspec.filesystem("tdbfs", location=str(array_path))
    with mounted(array_path, extra_args=["-o", "check=off"]) as mnt:
        on_mount = {}
        for dirpath, dirnames, filenames in os.walk(mnt):
            if "as_of" in Path(dirpath).relative_to(mnt).parts:
                dirnames[:] = []   # one folder per moment of the history: the walk of fragments/ is enough
                continue
            rel = Path(dirpath).relative_to(mnt).as_posix()
            rel = "" if rel == "." else rel
            listed = fs.ls(rel, detail=True)
            assert sorted(e["name"].rsplit("/", 1)[-1] for e in listed) == sorted(dirnames + filenames), rel
            for e in listed:
                name = e["name"].rsplit("/", 1)[-1]
                if name in filenames and not os.path.islink(os.path.join(dirpath, name)):
                    on_mount[e["name"]] = (e["size"], os.path.join(dirpath, name))
        assert len(on_mount) > 50
        for name, (size, path) in on_mount.items():
            data = Path(path).read_bytes()
            assert size == len(data) == os.stat(path).st_size, name
            assert fs.cat_file(name) == data, name
        cells = next(n for n in on_mount if n.endswith("/cells.csv"))
        data = Path(on_mount[cells][1]).read_bytes()
        with fs.open(cells, block_size=7) as f:   # ranged reads, in small blocks
            f.seek(3)
            assert f.read(20) == data[3:23]
            assert f.read() == data[23:]
        assert fs.cat_file(cells, start=-10) == data[-10:] and fs.cat_file(cells, 5, 9) == data[5:9]
        link = fs.info(cells.rsplit("/", 1)[0] + "/fields/" + "a0")
        assert link["islink"] and link["type"] == "directory" and link["destination"] == "../attrs/a0"


def test_pandas_reads_cells_and_stats_through_the_protocol(array_path):
    with tdbfs.open(array_path) as array, mounted(array_path, extra_args=["-o", "check=off"]) as mnt:
        frag = array.fragments[-1].name
        for path in (f"fragments/{frag}/cells.csv", "stats.csv", "timeline.csv"):
            on_mount = (mnt / path).read_bytes()
            url = f"tdbfs::{array_path}/{path}"
            with fsspec.open(url) as f:
                assert f.read() == on_mount
            read = pandas.read_csv(pandas_url(url))
            pandas.testing.assert_frame_equal(read, pandas.read_csv(io.BytesIO(on_mount)))
            assert len(read) > 0
            with fsspec.open(f"tdbfs://{path}", location=str(array_path)) as f:
                assert f.read() == on_mount


def test_a_chained_url_finds_the_group_and_its_members(tmp_path):
    built = groups.build_nested(tmp_path)
    with tdbfs.open(built.path) as group:
        for path in ("group.yaml", "members/mid/members/s2/array.yaml", "members/d/stats.csv"):
            with fsspec.open(f"tdbfs::{built.path}/{path}") as f:
                assert f.read() == group.open_view(path)
        # a member in the group's folder is an array of its own: its URL finds it, not the group
        with tdbfs.open(built.path / "d") as member:
            for path in ("array.yaml", "stats.csv"):
                with fsspec.open(f"tdbfs::{built.path}/d/{path}") as f:
                    assert f.read() == member.open_view(path)
    fs, inner = fsspec.core.url_to_fs(f"tdbfs::{built.path}/members/mid/members")
    assert inner == f"{built.path}/members/mid/members"
    assert fs.ls(inner, detail=False) == [f"{built.path}/members/mid/members/{n}" for n in ("leaf", "s2")]


def test_read_only_and_missing_paths(array_path):
    fs = fsspec.filesystem("tdbfs", location=str(array_path))
    with pytest.raises(PermissionError):
        fs.open("array.yaml", "wb")
    with pytest.raises(FileNotFoundError):
        fs.info("fragments/no_such_fragment")
    with pytest.raises(FileNotFoundError):
        fsspec.open(f"tdbfs::{array_path.parent}/not_an_array/array.yaml").open()
    assert not array_path.joinpath("array.yaml").exists()   # nothing written beside the array


def test_the_entry_point_names_the_filesystem():
    """pyproject.toml registers the protocol for every install (fsspec reads `fsspec.specs`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    value = project["project"]["entry-points"]["fsspec.specs"]["tdbfs"]
    module, _, name = value.partition(":")
    assert getattr(importlib.import_module(module), name) is tdbfs.library.filesystem.TdbfsFileSystem


def test_an_installed_tdbfs_registers_the_protocol(array_path):
    """In a fresh interpreter, with nothing registered by hand: the installed entry point serves."""
    from importlib.metadata import entry_points

    if not [e for e in entry_points(group="fsspec.specs") if e.name == "tdbfs"]:
        pytest.skip("tdbfs is installed without its fsspec.specs entry point: pip install -e . registers it")
    code = ("import fsspec, sys; fs = fsspec.filesystem('tdbfs', location=sys.argv[1]); "
            "print(type(fs).__module__, fs.cat_file('array.yaml')[:4].decode())")
    res = subprocess.run([sys.executable, "-c", code, str(array_path)], capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["tdbfs.library.filesystem", "uri:"], res.stderr
