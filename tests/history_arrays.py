"""Arrays with a history at explicit timestamps, and what TileDB reads from them at a time T.

`build_history(path, dense=..., ...)` writes, with tiledb-py, at timestamps `BASE + k` (BASE lies
0.1 s ahead, so every write comes after the schema TileDB created at the real time):

    +10  fragment F1;  metadata put a=1
    +20  fragment F2;  metadata put b=2
    +25  schema evolution: attribute `extra` added
    +30  fragment F3;  metadata put c=3, delete a
    +40  sparse: a delete commit (v = 20)
    +50  fragment F4;  metadata put b=5

then, once the real time has passed them all, as asked: commits consolidation (+ vacuum of commits),
fragment consolidation of +10..+20 only (`partial`) or of everything (`full`), vacuum (which then
writes a .ign for the commits a .con still lists), fragment metadata consolidation, array metadata
consolidation. Sparse arrays allow duplicates, so every fragment's cells stay visible in a read:
a fragment too many or too few changes what a read returns. Each write puts its own offset as `v`.

`isolated_read(uri, fragments, t)` reads at T a copy of the array that holds only the given fragment
folders (with fresh commits), the schemas and the delete commits (those embedded in a .con too):
TileDB's own answer for "exactly these fragments".
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import tiledb

import arrays

WRITES = (10, 20, 30, 50)
EVOLVE = 25
DELETE = 40
METADATA = {10: ({"a": 1}, ()), 20: ({"b": 2}, ()), 30: ({"c": 3}, ("a",)), 50: ({"b": 5}, ())}
CONSOLIDATIONS = ("none", "partial", "full")


def _cfg(**kw) -> tiledb.Config:
    cfg = {"sm.consolidation.buffer_size": "1000000"}
    cfg.update({(k if k.startswith("sm.") else f"sm.consolidation.{k}"): str(v) for k, v in kw.items()})
    return tiledb.Config(cfg)


def build_history(path: Path, *, dense: bool = False, consolidation: str = "none", vacuum: bool = False,
                  commits: bool = False, fragment_meta: bool = False, array_meta: bool = False) -> int:
    """Write the array (module doc); returns BASE."""
    base = arrays.now_ms() + 100
    uri = str(path)
    dim = tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int32)
    schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), sparse=not dense, allows_duplicates=not dense,
                                attrs=[tiledb.Attr("v", dtype=np.int32)], capacity=4)
    tiledb.Array.create(uri, schema)
    for k in WRITES:
        if k == 30:
            se = tiledb.ArraySchemaEvolution()
            se.add_attribute(tiledb.Attr("extra", dtype=np.int32, fill=-1))
            se.timestamp(base + EVOLVE)
            se.array_evolve(uri)
        cells = {"v": np.full(3, k, dtype=np.int32)}
        if k >= 30:
            cells["extra"] = np.full(3, k * 10, dtype=np.int32)
        with tiledb.open(uri, "w", timestamp=base + k) as A:
            if dense:
                start = k // 10 * 2     # overlapping ranges: a later write hides part of an earlier one
                A[start:start + 3] = cells
            else:
                A[np.array([k, k + 1, 0], dtype=np.int32)] = cells   # d=0 written by every fragment
            puts, deletes = METADATA[k]
            for key, value in puts.items():
                A.meta[key] = value
            for key in deletes:
                del A.meta[key]
        if k == 30 and not dense:
            with tiledb.open(uri, "d", timestamp=base + DELETE) as A:
                A.query(cond="v == 20").submit()
    while arrays.now_ms() <= base + WRITES[-1]:
        time.sleep(0.01)   # consolidations and vacuums take [0, now]: the whole history must lie in it
    if commits:
        tiledb.consolidate(uri, config=_cfg(mode="commits"))
        tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "commits"}))
    if consolidation == "partial":
        tiledb.consolidate(uri, config=_cfg(timestamp_start=base + 10, timestamp_end=base + 20))
    elif consolidation == "full":
        tiledb.consolidate(uri, config=_cfg())
    if vacuum:
        tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "fragments"}))
    if fragment_meta:
        tiledb.consolidate(uri, config=_cfg(mode="fragment_meta"))
    if array_meta:
        tiledb.consolidate(uri, config=_cfg(mode="array_meta"))
    return base


def read_at(uri: str, t: int) -> list[tuple]:
    """Every cell TileDB returns at T, as sorted (coordinate, field values...) rows."""
    with tiledb.open(uri, timestamp=t) as A:
        names = [A.schema.attr(i).name for i in range(A.schema.nattr)]
        if A.schema.sparse:
            data = A.query(attrs=names)[:]
            coords = data["d"].tolist()
        else:
            data = A.query(attrs=names)[0:100]
            coords = list(range(100))
        return sorted(zip(coords, *(np.asarray(data[n]).tolist() for n in names)))


def isolated_read(uri: str, fragment_names: list[str], t: int) -> list[tuple]:
    """read_at(T) of a copy of the array with only `fragment_names` (module doc)."""
    from tdbfs.format.commits import parse_consolidated_commits
    src = Path(uri)
    with tempfile.TemporaryDirectory(prefix="tdbfs_isolated_") as tmp:
        dst = Path(tmp) / "copy"
        shutil.copytree(src / "__schema", dst / "__schema")
        for d in ("__fragments", "__commits", "__meta", "__fragment_meta"):
            (dst / d).mkdir(parents=True, exist_ok=True)
        for name in fragment_names:
            shutil.copytree(src / "__fragments" / name, dst / "__fragments" / name)
            (dst / "__commits" / f"{name}.wrt").touch()
        for f in sorted((src / "__commits").iterdir()):
            if f.name.endswith(".del"):
                shutil.copy(f, dst / "__commits" / f.name)
            elif f.name.endswith(".con"):
                for entry in parse_consolidated_commits(f.read_bytes(), f.name):
                    if entry.kind == "del":
                        (dst / "__commits" / os.path.basename(entry.path)).write_bytes(entry.embedded)
        return read_at(str(dst), t)


def schema_attrs_at(uri: str, t: int) -> list[str]:
    with tiledb.open(uri, timestamp=t) as A:
        return [A.schema.attr(i).name for i in range(A.schema.nattr)]


def metadata_at(uri: str, t: int) -> dict:
    with tiledb.open(uri, timestamp=t) as A:
        return {k: A.meta[k] for k in A.meta.keys()}
