"""TileDB groups written for real by tiledb-py (and a SOMA experiment by tiledbsoma), and the
oracle: what tiledb-py's own Group API reads from them.

    nested = build_nested(base)      # top/ -> mid/ -> leaf/, arrays of both kinds, metadata at
                                     # every level, an absolute member outside, a removed member
    soma = build_soma(base / "exp")  # obs, ms/RNA/var, ms/RNA/X/data
    cycle = build_cycle(base)        # a/ holds b/, which adds a/ back by absolute URI
    oracle_members(path)             # [(name, type, resolved location)] by tiledb.Group
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import tiledb

import arrays


@dataclass
class BuiltGroup:
    path: Path
    arrays: dict[str, Path] = field(default_factory=dict)    # member path in the mount -> array folder
    groups: dict[str, Path] = field(default_factory=dict)    # member path in the mount ('' the root) -> folder
    written_by: str = "tiledb-py"


def small_array(path: Path, kind: str) -> Path:
    """A small dense or sparse array (two fragments) at `path`."""
    if kind == "dense":
        arrays.build_dense(path, ndim=1, extent=2, tiles_per_dim=2)
    else:
        arrays.build_sparse(path, ndim=2, capacity=3, cells=5, n_fragments=2)
    return path


def _add(group: Path, members: list[tuple[str, str, bool]]) -> None:
    """Add (uri, name, relative) members in one write."""
    with tiledb.Group(str(group), "w") as g:
        for uri, name, relative in members:
            g.add(uri, name=name, relative=relative)


def _meta(group: Path, values: dict) -> None:
    with tiledb.Group(str(group), "w") as g:
        for k, v in values.items():
            g.meta[k] = v


def build_nested(base: Path) -> BuiltGroup:
    """top/ (dense `d`, sparse `s`, group `mid`, absolute `ext`; `gone` added then removed)
    mid/ (sparse `s2`, group `leaf`), leaf/ (dense `d2`); metadata at every level."""
    top = base / "top"
    tiledb.Group.create(str(top))
    small_array(top / "d", "dense")
    small_array(top / "s", "sparse")
    small_array(top / "gone", "dense")
    outside = small_array(base / "outside" / "ext_array", "sparse")
    mid = top / "mid"
    tiledb.Group.create(str(mid))
    small_array(mid / "s2", "sparse")
    leaf = mid / "leaf"
    tiledb.Group.create(str(leaf))
    small_array(leaf / "d2", "dense")
    _add(leaf, [("d2", "d2", True)])
    _meta(leaf, {"level": 3, "label": "leaf"})
    _add(mid, [("s2", "s2", True), ("leaf", "leaf", True)])
    _meta(mid, {"level": 2})
    _add(top, [("d", "d", True), ("s", "s", True), ("gone", "gone", True)])
    _add(top, [("mid", "mid", True), (str(outside), "ext", False)])
    with tiledb.Group(str(top), "w") as g:
        g.remove("gone")
    _meta(top, {"level": 1, "title": "top group", "values": [1.5, 2.5]})
    _meta(top, {"title": "top group, renamed"})
    return BuiltGroup(top, arrays={"d": top / "d", "s": top / "s", "ext": outside, "mid/s2": mid / "s2",
                                   "mid/leaf/d2": leaf / "d2"},
                      groups={"": top, "mid": mid, "mid/leaf": leaf})


_SOMA_SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np, pyarrow as pa, tiledbsoma as soma
    with soma.Experiment.create(sys.argv[1]) as exp:
        obs = exp.add_new_dataframe("obs", index_column_names=["soma_joinid"], domain=[[0, 9]],
                                    schema=pa.schema([("soma_joinid", pa.int64()), ("cell_type", pa.large_string())]))
        obs.write(pa.Table.from_pydict({"soma_joinid": [0, 1, 2], "cell_type": ["T", "B", "T"]}))
        rna = exp.add_new_collection("ms").add_new_collection("RNA", soma.Measurement)
        var = rna.add_new_dataframe("var", schema=pa.schema([("soma_joinid", pa.int64()), ("gene", pa.large_string())]),
                                    index_column_names=["soma_joinid"], domain=[[0, 9]])
        var.write(pa.Table.from_pydict({"soma_joinid": [0, 1], "gene": ["CD4", "CD8A"]}))
        data = rna.add_new_collection("X").add_new_sparse_ndarray("data", type=pa.float32(), shape=(3, 2))
        data.write(pa.Table.from_pydict({"soma_dim_0": [0, 1, 2], "soma_dim_1": [0, 1, 0],
                                         "soma_data": np.array([1, 2, 3], np.float32)}))
''')


def build_soma(path: Path) -> BuiltGroup:
    """A TileDB-SOMA experiment written by the real tiledbsoma (in a child process: it carries its own
    libtiledb, which must not meet tiledb-py's in one process)."""
    subprocess.run([sys.executable, "-c", _SOMA_SCRIPT, str(path)], check=True, capture_output=True, timeout=300)
    return BuiltGroup(path, arrays={"obs": path / "obs", "ms/RNA/var": path / "ms/RNA/var",
                                    "ms/RNA/X/data": path / "ms/RNA/X/data"},
                      groups={"": path, "ms": path / "ms", "ms/RNA": path / "ms/RNA", "ms/RNA/X": path / "ms/RNA/X"},
                      written_by="tiledbsoma")


def build_cycle(base: Path) -> BuiltGroup:
    """a/ holds the group b/ (relative) and the array x; b/ adds a/ back by absolute URI."""
    a, b = base / "a", base / "a" / "b"
    tiledb.Group.create(str(a))
    tiledb.Group.create(str(b))
    small_array(a / "x", "dense")
    _add(a, [("b", "b", True), ("x", "x", True)])
    _add(b, [(str(a), "up", False)])
    return BuiltGroup(a, arrays={"x": a / "x"}, groups={"": a, "b": b})


def oracle_members(path: Path) -> list[tuple[str, str, str]]:
    """(name, 'array'|'group', resolved location) of each member, as tiledb-py's Group lists them."""
    out = []
    with tiledb.Group(str(path)) as g:
        for obj in g:
            kind = "group" if obj.type is tiledb.Group else "array"
            uri = obj.uri[len("file://"):] if obj.uri.startswith("file://") else obj.uri
            out.append((obj.name, kind, uri.rstrip("/")))
    return sorted(out)


def oracle_metadata(path: Path) -> dict:
    with tiledb.Group(str(path)) as g:
        return {k: g.meta[k] for k in g.meta.keys()}


def details_files(group: Path) -> list[Path]:
    return sorted((group / "__group").iterdir())


# -- group details written by hand (versions and damage TileDB does not write itself) -------------

def member_bytes(version: int, object_type: int, relative: bool, uri: str, name: str | None,
                 deleted: bool = False) -> bytes:
    """One group member as `GroupMemberV1/V2::serialize` writes it."""
    out = struct.pack("<IBBQ", version, object_type, relative, len(uri.encode())) + uri.encode()
    if name is None:
        out += b"\0"
    else:
        out += b"\1" + struct.pack("<Q", len(name.encode())) + name.encode()
    if version == 2:
        out += bytes([deleted])
    return out


def details_payload(version: int, members: list[bytes]) -> bytes:
    return struct.pack("<IQ", version, len(members)) + b"".join(members)


def plain_generic_tile(payload: bytes, version: int = 22) -> bytes:
    """A generic tile (docs/format.md §2.1) without filters holding `payload` in one chunk."""
    pipeline = struct.pack("<II", 65536, 0)
    tile = struct.pack("<Q", 1) + struct.pack("<III", len(payload), len(payload), 0) + payload
    header = struct.pack("<IQQBQBI", version, len(tile), len(payload), 4, 1, 0, len(pipeline))
    return header + pipeline + tile


def write_details(group: Path, name: str, payload: bytes) -> Path:
    """A details file named as TileDB names them (`__t1_t2_uuid_2`), holding `payload`."""
    path = group / "__group" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(plain_generic_tile(payload))
    return path


def walk_bytes(root: str | os.PathLike) -> dict[str, tuple]:
    """Every entry under `root` (a mount): path -> ('dir',) / ('link', target) / ('file', bytes)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for d in dirnames:
            p = os.path.join(dirpath, d)
            rel = os.path.normpath(os.path.join(rel_dir, d))
            out[rel] = ("link", os.readlink(p)) if os.path.islink(p) else ("dir",)
        for f in filenames:
            p = os.path.join(dirpath, f)
            rel = os.path.normpath(os.path.join(rel_dir, f))
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            else:
                with open(p, "rb") as fh:
                    out[rel] = ("file", fh.read())
    return out
