"""Arrays, groups and workspaces the world wrote (tests/world_arrays.py lists them, tests/data/SOURCES.md
says where each comes from), held to what TileDB itself reads from them.

For every item TileDB opens: each array's fragments, format versions, non-empty domains, cell counts and
leaf MBRs equal tiledb-py's FragmentInfoList; its current schema and its metadata (and each group's) equal
tiledb-py's; each fragment's `cells.csv` holds, as a multiset of rows, what tiledb-py reads with the
array opened at that fragment's timestamps; each group's members equal tiledb.Group's (for a group
written before TileDB 2.9, which has only its marker, the objects TileDB finds in its folder); and the
item is silent: `problems: []` in every array.yaml, fragment.yaml and group.yaml, every file of the tree
reads, and `tdbfs check` exits 0 with no warning line. For every item TileDB refuses: every file that
cannot be read is explained by a problem naming the file and offset, and `check` exits 1 saying why.
Everything is read from private copies, without FUSE (tdbfs.frontend.common.open_root and browse.lookup);
the last tests mount three of them for real.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest
import tiledb
import yaml

import world_arrays as world
from mounting import tdbfs_command
from tdbfs.cli.browse import lookup
from tdbfs.frontend.common import open_root
from tdbfs.views.nodes import DirNode, FileNode, ViewError

MAX_DEPTH = 8   # groups nest a few levels; a deeper walk would be a cycle


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """item -> a private copy of it (tdbfs and tiledb-py only ever open copies)."""
    base = tmp_path_factory.mktemp("world")
    made: dict = {}

    def copy(item: world.WorldItem):
        if item.path not in made:
            dest = base / item.id / item.location.name
            shutil.copytree(item.location, dest, symlinks=True)
            made[item.path] = dest
        return made[item.path]

    return copy


def _read(root, path: str) -> bytes:
    node, _ = lookup(root, path)
    data = node.read(0, node.size() + 1)
    assert len(data) == node.size(), f"{path}: read {len(data)} bytes, stat says {node.size()}"
    return data


def _yaml(root, path: str):
    return yaml.safe_load(_read(root, path))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _objects(root, prefix: str = "", depth: int = 0):
    """(kind, view path, its summary) of every array and group in the view, the item itself first."""
    node, _ = lookup(root, prefix) if prefix else (root, "")
    kids = node.children()
    if "array.yaml" in kids:
        yield "array", prefix, _yaml(root, _join(prefix, "array.yaml"))
    elif "group.yaml" in kids:
        summary = _yaml(root, _join(prefix, "group.yaml"))
        yield "group", prefix, summary
        if depth < MAX_DEPTH:
            for m in summary.get("members") or []:
                yield from _objects(root, _join(prefix, f"members/{m['name']}"), depth + 1)
    elif "workspace.yaml" in kids:
        yield "workspace", prefix, _yaml(root, _join(prefix, "workspace.yaml"))
        for name in lookup(root, _join(prefix, "arrays"))[0].children():
            yield from _objects(root, _join(prefix, f"arrays/{name}"), depth + 1)
    else:
        raise AssertionError(f"{prefix or '/'}: neither array.yaml, group.yaml nor workspace.yaml: {sorted(kids)}")


def _arrays(root):
    return [(p, s) for kind, p, s in _objects(root) if kind == "array"]


def _walk(root) -> tuple[int, dict]:
    """Read every file (as_of/ views once per time, as everything else); (files read, {path: reason} of
    those that fail)."""
    failed, count = {}, 0

    def walk(node, path, depth):
        nonlocal count
        try:
            kids = node.children()
        except ViewError as exc:
            failed[path + "/"] = str(exc)
            return
        for name, kid in kids.items():
            p = _join(path, name)
            if isinstance(kid, DirNode) and depth < 4 * MAX_DEPTH:
                walk(kid, p, depth + 1)
            elif isinstance(kid, FileNode):
                count += 1
                try:
                    size = kid.size()
                    assert len(kid.read(0, size)) == size, p
                except ViewError as exc:
                    failed[p] = str(exc)

    walk(root, "", 0)
    return count, failed


def _check(path) -> subprocess.CompletedProcess:
    return subprocess.run(tdbfs_command() + ["check", str(path)], capture_output=True, text=True, timeout=300)


def _problems(root) -> list[tuple[str, dict]]:
    """(view path of the summary, problem) of every array.yaml, fragment.yaml and group.yaml."""
    out = []
    for kind, prefix, summary in _objects(root):
        out += [(_join(prefix, f"{kind}.yaml"), p) for p in summary.get("problems") or []]
        if kind == "array":
            for frag in lookup(root, _join(prefix, "fragments"))[0].children():
                path = _join(prefix, f"fragments/{frag}/fragment.yaml")
                out += [(path, p) for p in _yaml(root, path).get("problems") or []]
    return out


def _fragment_info(location) -> dict:
    """Fragment folder name -> (version, non-empty domain, (t1, t2)) as tiledb-py reports them."""
    fl = tiledb.FragmentInfoList(str(location))
    out = {}
    for k in range(len(fl)):
        name = os.path.basename(fl.uri[k].rstrip("/"))
        ned = [[_plain(v) for v in r] for r in fl.nonempty_domain[k]]
        out[name] = (int(fl.version[k]), ned, tuple(int(t) for t in fl.timestamp_range[k]))
    return out


def _cells_and_mbrs(location) -> dict:
    """Fragment folder name -> (cell count, MBRs of its data tiles or None for dense) as tiledb-py reports them."""
    with tiledb.open(str(location)) as A:
        sparse = A.schema.sparse
    fl = tiledb.FragmentInfoList(str(location), include_mbrs=sparse)
    return {os.path.basename(fl.uri[k].rstrip("/")):
            (int(fl.cell_num[k]), [[_plain(v) for r in m for v in r] for m in fl.mbrs[k]] if sparse else None)
            for k in range(len(fl))}


def _leaf_mbrs(root, base: str, schema) -> list:
    """The last level of a fragment's rtree/ (one MBR per data tile), values typed as the dimensions."""
    levels = [n for n in lookup(root, f"{base}/rtree")[0].children() if n.startswith("level_")]
    last = max(levels, key=lambda n: int(n[len("level_"):-len(".csv")]))
    rows = list(csv.reader(io.StringIO(_read(root, f"{base}/rtree/{last}").decode(), newline="")))
    dims = [d for d in schema.domain for _ in (0, 1)]
    return [[_parse(v, d) for v, d in zip(r[1:], dims)] for r in rows[1:]]


def _plain(v):
    """A value as tiledb-py returns it, in one comparable form (cells.csv's text parsed back gives the same)."""
    if v is None or v is np.ma.masked:
        return None
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("utf-8", "backslashreplace")
    if isinstance(v, str):
        return v
    if isinstance(v, np.void):
        return tuple(_plain(x) for x in v.tolist()) if v.dtype.names else tuple(v.tolist())
    if isinstance(v, (np.ndarray, list, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return int(v.astype("int64"))
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return "NaN" if math.isnan(v) else float(v)
    return int(v)


def _parse(text: str, field) -> object:
    """One cells.csv value back to the form of _plain, by the field's type in TileDB's schema."""
    dt = np.dtype(field.dtype)
    is_text = dt.kind in "SUO"
    several = (not is_text) and (getattr(field, "isvar", False) or (getattr(field, "ncells", 1) or 1) > 1)
    if is_text:
        return text

    def one(tok: str):
        if dt.kind == "f":
            v = float(dt.type(tok))
            return "NaN" if math.isnan(v) else v
        if dt.kind in "mM":
            return int(tok)
        if dt.kind == "b":          # cells.csv writes a bool as 0/1, tile_K.txt as false/true
            return int(tok in ("1", "true"))
        return int(tok)

    return tuple(one(t) for t in text.split()) if several else one(text)


def _columns(schema) -> list[tuple[str, object, bool]]:
    """(column name, TileDB field, is validity column) of cells.csv's leading columns."""
    cols = [(d.name, d, False) for d in schema.domain]
    for k in range(schema.nattr):
        a = schema.attr(k)
        cols.append((a.name, a, False))
        if a.isnullable:
            cols.append((f"{a.name}.valid", a, True))
    return cols


def _csv_rows(text: str, schema) -> Counter:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    cols = _columns(schema)
    assert header[:len(cols)] == [c[0] for c in cols], (header, [c[0] for c in cols])
    out = Counter()
    for row in reader:
        values = []
        for j, (_, fld, is_valid) in enumerate(cols):
            if is_valid:
                continue
            nullable = getattr(fld, "isnullable", False)
            if nullable and row[j + 1] == "0":
                values.append(None)
            else:
                values.append(_parse(row[j], fld))
        out[tuple(values)] += 1
    return out


def _tiledb_rows(location, frag_ts, ned, schema) -> Counter:
    """The cells tiledb-py reads with the array opened at one fragment's timestamps: a sparse fragment's
    all, a dense fragment's those in its non-empty domain."""
    with tiledb.open(str(location), timestamp=frag_ts) as A:
        if schema.sparse:
            res = A.query()[:]
        else:
            res = A.query(coords=True).multi_index[tuple(slice(lo, hi) for lo, hi in ned)]
    names = [d.name for d in schema.domain] + [schema.attr(k).name for k in range(schema.nattr)]
    cols = []
    for n in names:
        v = res[n]
        v = v.reshape(-1) if isinstance(v, np.ma.MaskedArray) else np.asarray(v).reshape(-1)
        cols.append(v.astype("int64") if v.dtype.kind in "mM" else v)   # cells.csv: the stored integer
    out = Counter()
    for row in zip(*[c.tolist() if not isinstance(c, np.ma.MaskedArray) else list(c) for c in cols]):
        out[tuple(_plain(v) for v in row)] += 1
    return out


def _member_locations(location) -> dict:
    """Member name -> (type, location) as TileDB reads the group; a group with only its marker (written
    before TileDB 2.9) has no member list: TileDB's objects in its folder are its members."""
    if not os.path.isdir(os.path.join(location, "__group")):
        found: list = []
        tiledb.ls(str(location), lambda uri, kind: found.append((uri, kind)))
        return {os.path.basename(u.rstrip("/")): (k, os.path.realpath(u.removeprefix("file://")))
                for u, k in found}
    with tiledb.Group(str(location)) as g:
        return {m.name: ("array" if m.type is tiledb.Array else "group",
                         os.path.realpath(m.uri.removeprefix("file://"))) for m in g}


def _problem_lines(out: str) -> list[str]:
    """`tdbfs check` lines that are not a per-object summary."""
    return [ln for ln in out.splitlines() if ln.strip() and not _summary_line(ln)]


def _summary_line(line: str) -> bool:
    tail = line.rsplit(": ", 1)[-1]
    return tail.startswith(("clean", "group of")) or " problems (" in tail or " warnings (" in tail


# ---------------------------------------------------------------------------
# the data and where it comes from
# ---------------------------------------------------------------------------

def test_every_item_is_sourced_and_licensed():
    sources = (world.DATA / "SOURCES.md").read_text()
    for item in world.ITEMS:
        assert item.location.is_dir(), item.path
        assert f"`{item.location.relative_to(world.DATA)}`" in sources or \
            f"`{item.location.name}`" in sources, f"{item.path} is not named in SOURCES.md"
        assert item.project in sources
    listed = {world.DATA / i.path for i in world.ITEMS}
    for project in world.project_folders():
        assert (project / "LICENSE").is_file(), f"{project.name}: its licence file"
        assert "MIT" in (project / "LICENSE").read_text()[:200]
        for sub in project.iterdir():
            assert not sub.is_dir() or sub in listed, f"{sub} is in tests/data/world but not in world_arrays.py"
    assert world.tree_bytes(world.WORLD) < 15 << 20


# ---------------------------------------------------------------------------
# what TileDB opens: the same fragments, cells and members, and silence
# ---------------------------------------------------------------------------

_HEALTHY = [pytest.param(i, id=i.id) for i in world.items(world.HEALTHY)]
_GROUPS = [pytest.param(i, id=i.id) for i in world.items(world.HEALTHY) if i.kind == "group"]


@pytest.mark.parametrize("item", _HEALTHY)
def test_fragments_match_tiledb(item, copies):
    root = open_root(str(copies(item)))
    arrays = _arrays(root)
    assert arrays or not item.formats, "no array found in the view"
    versions = set()
    for prefix, summary in arrays:
        info = _fragment_info(summary["uri"])
        listed = sorted(lookup(root, _join(prefix, "fragments"))[0].children())
        assert listed == sorted(info), f"{prefix or '/'}: fragments/ lists {listed}, TileDB {sorted(info)}"
        assert summary["counts"]["fragments"] == len(info), prefix
        assert sorted(summary["format_versions"]["fragments"]) == sorted({v for v, _, _ in info.values()}), prefix
        cells_mbrs = _cells_and_mbrs(summary["uri"])
        for name, (version, ned, _) in info.items():
            frag = _yaml(root, _join(prefix, f"fragments/{name}/fragment.yaml"))
            assert frag["version"] == version, (prefix, name)   # VIEWS.md: fragment.yaml `version`
            assert [[_plain(v) for v in r] for r in frag["non_empty_domain"].values()] == ned, (prefix, name)
            cell_num, mbrs = cells_mbrs[name]
            assert frag["cell_count"] == cell_num, (prefix, name)
            if mbrs is not None:
                with tiledb.open(summary["uri"]) as A:
                    assert _leaf_mbrs(root, _join(prefix, f"fragments/{name}"), A.schema) == mbrs, (prefix, name)
            versions.add(version)
    assert versions == set(item.formats)


@pytest.mark.parametrize("item", _HEALTHY)
def test_cells_match_tiledb_at_each_fragments_timestamps(item, copies):
    root = open_root(str(copies(item)))
    compared = 0
    for prefix, summary in _arrays(root):
        for name, (_, ned, ts) in _fragment_info(summary["uri"]).items():
            with tiledb.open(summary["uri"], timestamp=ts) as A:
                schema = A.schema
            got = _csv_rows(_read(root, _join(prefix, f"fragments/{name}/cells.csv")).decode(), schema)
            want = _tiledb_rows(summary["uri"], ts, ned, schema)
            assert got == want, (f"{prefix or '/'} fragment {name}: cells.csv has {sum(got.values())} rows, "
                                 f"TileDB {sum(want.values())}; only in cells.csv: {list(got - want)[:3]}, "
                                 f"only in TileDB: {list(want - got)[:3]}")
            compared += 1
    assert compared == sum(len(_fragment_info(s["uri"])) for _, s in _arrays(root))


@pytest.mark.parametrize("item", _GROUPS)
def test_group_members_match_tiledb(item, copies):
    root = open_root(str(copies(item)))
    groups = [(p, s) for kind, p, s in _objects(root) if kind == "group"]
    assert groups and groups[0][0] == ""
    for prefix, summary in groups:
        want = _member_locations(summary["uri"])
        got = {m["name"]: (m["type"], os.path.realpath(m["location"])) for m in summary.get("members") or []}
        assert got == want, f"{prefix or '/'}: group.yaml members {got}, TileDB {want}"


_FILTER_ALIASES = {"FLOATSCALE": "SCALEFLOAT", "NOOP": "NONE"}


def _filters_tiledb(fl) -> list:
    out = []
    for f in fl or []:
        name = type(f).__name__.removesuffix("Filter").upper()
        out.append((_FILTER_ALIASES.get(name, name), getattr(f, "level", None)))
    return out


def _filters_view(pipeline) -> list:
    filters = (pipeline or {}).get("filters") or []
    return [(f["name"].replace("_", ""), (f.get("options") or {}).get("level")) for f in filters]


def _scalar(v):
    return None if v is None else _plain(v)


@pytest.mark.parametrize("item", [pytest.param(i, id=i.id) for i in world.items(world.HEALTHY)
                                  if i.kind != "workspace"])
def test_schema_matches_tiledb(item, copies):
    """schema/current.yaml of every array: what tiledb-py's ArraySchema says of orders, capacity, duplicates,
    dimensions (domain, tile extent, filters) and attributes (nullable, var-sized, values per cell, filters)."""
    root = open_root(str(copies(item)))
    for prefix, summary in _arrays(root):
        with tiledb.open(summary["uri"]) as A:
            sch = A.schema
        cur = _yaml(root, _join(prefix, "schema/current.yaml"))
        where = prefix or "/"
        assert (cur["array_type"], cur["tile_order"], cur["cell_order"]) == \
            ("sparse" if sch.sparse else "dense", sch.tile_order, sch.cell_order), where
        if sch.sparse:
            assert (cur["capacity"], bool(cur.get("allows_dups"))) == (sch.capacity, sch.allows_duplicates), where
        assert _filters_view(cur.get("coords_filters")) == _filters_tiledb(sch.coords_filters), where
        assert _filters_view(cur.get("offsets_filters")) == _filters_tiledb(sch.offsets_filters), where
        dims = cur["domain"]["dimensions"]
        assert [d["name"] for d in dims] == [d.name for d in sch.domain], where
        for d, td in zip(dims, sch.domain):
            # from format 5 a dimension stored without filters of its own takes the coordinates' (TileDB's
            # Dimension::deserialize); before, dimensions have no filter list (the __coords file has them)
            own = _filters_view(d.get("filters"))
            if not own and cur["version"] >= 5:
                own = _filters_view(cur.get("coords_filters"))
            assert own == _filters_tiledb(td.filters), (where, d["name"])
            if np.dtype(td.dtype).kind not in "SUO":
                assert [_plain(v) for v in d["domain"]] == [_plain(v) for v in td.domain], (where, d["name"])
                assert _scalar(d.get("tile_extent")) == _scalar(td.tile), (where, d["name"])
        attrs = cur["attributes"]
        assert [a["name"] for a in attrs] == [sch.attr(k).name for k in range(sch.nattr)], where
        for a, ta in zip(attrs, (sch.attr(k) for k in range(sch.nattr))):
            assert bool(a.get("nullable", False)) == ta.isnullable, (where, a["name"])
            assert (a["cell_val_num"] == "var") == ta.isvar, (where, a["name"])
            if not ta.isvar:
                assert a["cell_val_num"] == ta.ncells, (where, a["name"])
            assert _filters_view(a.get("filters")) == _filters_tiledb(ta.filters), (where, a["name"])


def _meta_value(v):
    if isinstance(v, (np.ndarray, list, tuple)):
        return tuple(_plain(x) for x in v)
    return _plain(v)


@pytest.mark.parametrize("item", _HEALTHY)
def test_metadata_matches_tiledb(item, copies):
    """metadata/merged.yaml of every array and group: the keys and values TileDB's metadata holds."""
    root = open_root(str(copies(item)))
    compared = 0
    for kind, prefix, summary in _objects(root):
        if kind == "array":
            with tiledb.open(summary["uri"]) as A:
                want = {k: _meta_value(A.meta[k]) for k in A.meta.keys()}
        elif os.path.isdir(os.path.join(summary["uri"], "__group")) or \
                os.path.isdir(os.path.join(summary["uri"], "__meta")):
            with tiledb.Group(summary["uri"]) as g:
                want = {k: _meta_value(g.meta[k]) for k in g.meta.keys()}
        else:
            continue
        merged = _yaml(root, _join(prefix, "metadata/merged.yaml"))["metadata"] or {}
        got = {k: _meta_value(v["value"]) for k, v in merged.items()}
        assert got == want, f"{prefix or '/'}: metadata/merged.yaml {got}, TileDB {want}"
        compared += 1
    assert compared


@pytest.mark.parametrize("item", [pytest.param(i, id=i.id) for i in world.items(world.HEALTHY, world.LEGACY_0X)])
def test_healthy_is_silent(item, copies):
    path = copies(item)
    root = open_root(str(path))
    count, failed = _walk(root)
    assert count > 4 and not failed, failed
    found = sorted((os.path.basename(p["file"]), p["structure"], p["severity"]) for _, p in _problems(root))
    assert found == sorted({(f, s, "warning") for f, s in item.warnings}), found
    res = _check(path)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 0, res.stdout + res.stderr
    warned = [ln for ln in res.stdout.splitlines() if ln.startswith("warning")]
    assert [ln.split(":", 2)[1].strip() for ln in warned] == [f for f, _ in item.warnings], res.stdout
    assert _problem_lines(res.stdout) == warned, res.stdout


# ---------------------------------------------------------------------------
# what TileDB refuses, and what the repository lost
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("item", [pytest.param(i, id=i.id) for i in world.items(world.REFUSED)])
def test_refused_every_failure_explained(item, copies):
    path = copies(item)
    with pytest.raises(tiledb.TileDBError):
        tiledb.open(str(path)).close()
    root = open_root(str(path))
    count, failed = _walk(root)
    problems = [p for _, p in _problems(root) if p["severity"] == "error"]
    assert failed and problems
    assert all(p["file"] and (isinstance(p["offset"], int) or p["offset"] is None) for p in problems)
    assert any(item.why in p["message"] and isinstance(p["offset"], int) for p in problems), problems
    unexplained = {f: why for f, why in failed.items()
                   if not any(p["message"] in why and isinstance(p["offset"], int) for p in problems)}
    assert not unexplained, unexplained
    for f, s in item.problems:
        assert any(p["file"] == f and p["structure"] == s for p in problems), (f, s, problems)
    res = _check(path)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert any(item.why in ln for ln in _problem_lines(res.stdout)), res.stdout


@pytest.mark.parametrize("item", [pytest.param(i, id=i.id) for i in world.items(world.DAMAGED_UPSTREAM)])
def test_damaged_upstream_names_what_is_lost(item, copies):
    path = copies(item)
    root = open_root(str(path))
    assert _fragment_info(path) == {}          # TileDB opens it and reads nothing
    count, failed = _walk(root)
    assert not failed, failed
    found = sorted((p["file"], p["structure"]) for _, p in _problems(root))
    assert found == sorted(item.problems)
    res = _check(path)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert [ln.split(":", 1)[0] for ln in _problem_lines(res.stdout)] == [f for f, _ in item.problems]


# ---------------------------------------------------------------------------
# real mounts
# ---------------------------------------------------------------------------

def _sh(*cmd) -> str:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, check=True).stdout


def _cli(*args) -> str:
    return subprocess.run(tdbfs_command() + list(args), capture_output=True, text=True, timeout=120,
                          check=True).stdout


@pytest.mark.parametrize("path", ["world/TileDB-VCF/v4_small.tdb", "world/TileDB-R/legacy_write_penguins",
                                  "world/GenomicsDB/ws_new"])
def test_mounted_and_read_with_cat_and_ls(path, copies, mount):
    item = next(i for i in world.ITEMS if i.path == path)
    src = copies(item)
    mnt = mount(src, extra_args=["-o", "check=off"])   # compared with `tdbfs cat`, which checks nothing
    root = open_root(str(src))
    prefix, summary = next((p, s) for p, s in _arrays(root) if s["counts"]["fragments"])
    base = mnt / prefix if prefix else mnt
    frags = _sh("ls", str(base / "fragments")).split()
    assert frags == sorted(lookup(root, _join(prefix, "fragments"))[0].children()) and frags
    top = "group.yaml" if item.kind == "group" else "workspace.yaml" if item.kind == "workspace" else "array.yaml"
    if item.kind == "group":
        assert _sh("ls", str(mnt / "members")).split() == sorted(_member_locations(src))
    assert _sh("cat", str(mnt / top)) == _cli("cat", str(src), top)
    assert "problems: []" in _sh("cat", str(base / "array.yaml"))
    text = _sh("cat", str(base / "fragments" / frags[0] / "cells.csv"))
    assert os.stat(base / "fragments" / frags[0] / "cells.csv").st_size == len(text.encode())
    assert text == _cli("cat", str(src), _join(prefix, f"fragments/{frags[0]}/cells.csv"))
    if item.kind != "workspace":
        with tiledb.open(summary["uri"]) as A:
            schema = A.schema
        assert sum(_csv_rows(text, schema).values()) == int(tiledb.FragmentInfoList(summary["uri"]).cell_num[0]) \
            or not schema.sparse
    else:
        assert len(text.splitlines()) > 1
