"""Seeded damage of real TileDB arrays, and a hang-proof walk of their tdbfs mount.

The pieces, used by tests/test_damage.py, tests/test_trust.py and scripts/damage:

    pristine = build_pristine(base_dir)       # name -> Path; arrays written by tiledb-py
    d = plan(seed, pristine)                  # a Damage: what will be done, to which file
    result = run_copy(d, pristine, workdir)   # copy, damage, mount, walk, check, compare
    result.failures                           # [Failure(category, ...)], each naming seed and damage

A Damage is applied to a copy of a pristine array (shutil.copytree with symlinks=True).
`plan(seed)` depends only on the seed and the pristine array's bytes, so a failure is
reproduced with `scripts/damage --seed S --count 1 --keep DIR`.

Families of damage (FAMILIES; the family is seed % len(FAMILIES), so every run of a few
dozen seeds covers them all):
    flip      1-3 bytes xor-ed, in a structure field, compressed chunk bytes, or anywhere
    truncate  the file cut at a structure boundary or anywhere
    huge      an 8-byte field (or a u32 field) set to 2**64-1, 2**63 or 549755814033
    swap      two tiles / generic tiles / chunks exchanged (or two byte ranges)
    delete    a file (or a fragment folder) removed
    junk      an extra file in a fragment folder, under __fragments/ or at the root
    symlink   a file or folder replaced by a symlink out of the array (the secret file, a
              folder holding secret files, /etc, /dev/zero)
    fifo      a FIFO (os.mkfifo) in place of a file
    chardev   a character device in place of a file: (1,3) /dev/null or (1,5) /dev/zero

The walk (walk_mount) runs in a child process (this file run as a script: `damage.py
--walk MNT SECRET`), which prints one line before every operation; the parent kills
it when no line came for OP_TIMEOUT seconds, and reports the operation that hung.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import random
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: the marker written into every file outside the array; no byte read through the mount may hold it
SECRET = "TDBFS-OUTSIDE-SECRET-b7c1e0f3"
OP_TIMEOUT = float(os.environ.get("TDBFS_DAMAGE_OP_TIMEOUT", "10"))
WALK_TIMEOUT = 180.0          # a whole walk, whatever the per-operation progress
CHECK_TIMEOUT = 30.0
RSS_BOUND = 400 << 20         # the daemon's peak resident set (VmHWM)
HUGE_VALUES = (2**64 - 1, 2**63, 549755814033)
FAMILIES = ("flip", "truncate", "huge", "swap", "delete", "junk", "symlink", "fifo", "chardev")
BYTE_FAMILIES = ("flip", "truncate", "huge", "swap")
PROBLEM_KEYS = ("file", "structure", "offset", "message", "severity")
#: damage families whose finding needs only listings, stat and the footer: listed from the first read
LISTING_FAMILIES = ("delete", "junk", "symlink", "fifo", "chardev")
#: files whose deletion can be seen (something names them: the footer, a commit, a schema); a
#: deleted __meta file, .del, .vac, .con, .ign or .meta looks like a vacuumed one
DETECTABLE_DELETES = ("fragment_metadata", "data", "var", "validity", "commit_wrt", "folder", "schema",
                      "enumeration")


# ---------------------------------------------------------------------------------------------
# pristine arrays (tiledb-py)

#: name -> (tests/arrays.py kind, options)
PRISTINE_SPECS: dict[str, tuple[str, dict]] = {
    # dense 2-D, every attribute ZSTD (a0 int32, a1 var string, a2 nullable float64), 2 fragments
    "dense_zstd": ("dense", dict(ndim=2, tiles_per_dim=2, filters="ZSTD")),
    # sparse 2-D, ZSTD + SHA-256 checksums on every field, var string, nullable, nullable var int32
    "sparse_checksums": ("filters", dict(filter="ZSTD+CHECKSUM_SHA256", sparse=True, ndim=2, cells=9, capacity=4)),
    # array metadata at three timestamps, consolidated (a merged __meta file and a .vac)
    "metadata": ("metadata", dict(consolidate_meta=True)),
    # 2 fragments, fragment-metadata consolidation (__fragment_meta/*.meta), fragment
    # consolidation (a consolidated fragment with t.tdb) and its .vac, not vacuumed
    "consolidated": ("consolidated", dict(sparse=True, n_fragments=2, cells=5, fragment_meta=True)),
    # 2 fragments and two delete commits (.del), then consolidated (dt.tdb / dci.tdb)
    "deletes": ("deletes", dict(n_fragments=2)),
    # commit consolidation (.con), then fragments consolidated and vacuumed (.ign)
    "commits": ("commits", dict(n_fragments=2)),
    # enumerations (__schema/__enumerations), extended by schema evolution
    "enumerations": ("enumerations", dict(extend=True)),
}


def build_pristine(base_dir: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, Path]:
    """Write the pristine arrays with tiledb-py under base_dir; name -> path."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import arrays
    out = {}
    for name in names or PRISTINE_SPECS:
        kind, opts = PRISTINE_SPECS[name]
        out[name] = arrays.make_array(base_dir, kind, name=name, **opts).path
    return out


# ---------------------------------------------------------------------------------------------
# what the files of an array are, and where their fields lie

def classify(rel: str) -> str:
    """The kind of an array file, from its path relative to the array root."""
    parts = rel.split("/")
    base = parts[-1]
    if parts[0] == "__schema":
        return "enumeration" if len(parts) > 2 and parts[1] == "__enumerations" else "schema"
    if parts[0] == "__commits":
        ext = base.rsplit(".", 1)[-1] if "." in base else ""
        return {"wrt": "commit_wrt", "del": "commit_del", "upd": "commit_upd", "con": "commit_con",
                "ign": "commit_ign", "vac": "commit_vac"}.get(ext, "commit_other")
    if parts[0] == "__meta":
        return "meta_vac" if base.endswith(".vac") else "meta"
    if parts[0] == "__fragment_meta":
        return "fragment_meta"
    if parts[0] == "__fragments" and len(parts) == 3:
        if base == "__fragment_metadata.tdb":
            return "fragment_metadata"
        if base.endswith("_var.tdb"):
            return "var"
        if base.endswith("_validity.tdb"):
            return "validity"
        return "data"
    return "other"


GENERIC_TILE_KINDS = ("schema", "enumeration", "commit_del", "commit_upd", "meta", "fragment_meta")
DATA_KINDS = ("data", "var", "validity")


@dataclass
class Layout:
    """Structure of one file, found by walking its bytes (no tdbfs code involved)."""
    fields: list = field(default_factory=list)    # (offset, width, name)
    tiles: list = field(default_factory=list)     # (start, end, name): tiles / generic tiles
    chunks: list = field(default_factory=list)    # (start, end, name): compressed chunk data
    boundaries: list = field(default_factory=list)


def _generic_tile(data: bytes, at: int, label: str, lay: Layout) -> int | None:
    """Parse a generic tile (34-byte header, pipeline, chunks) at `at`; its end, or None."""
    if at + 34 > len(data):
        return None
    version, persisted, tile_size, _dt, _cs, _enc, ps = struct.unpack_from("<IQQBQBI", data, at)
    body = at + 34 + ps
    if version > 64 or ps > 1 << 16 or body + 8 > len(data) or body + persisted > len(data):
        return None
    lay.fields += [(at, 4, f"{label} version"), (at + 4, 8, f"{label} persisted_size"),
                   (at + 12, 8, f"{label} tile_size"), (at + 21, 8, f"{label} cell_size"),
                   (at + 30, 4, f"{label} filter_pipeline_size")]
    if ps >= 8:
        lay.fields.append((at + 34 + 4, 4, f"{label} filter count"))
    lay.boundaries += [at, at + 34, body]
    _chunks(data, body, body + persisted, label, lay)
    lay.tiles.append((at, body + persisted, label))
    return body + persisted


def _chunks(data: bytes, at: int, end: int, label: str, lay: Layout) -> int | None:
    """A chunked tile (u64 nchunks, then u32 unfiltered, u32 filtered, u32 metadata, ...)."""
    if at + 8 > min(end, len(data)):
        return None
    n = struct.unpack_from("<Q", data, at)[0]
    lay.fields.append((at, 8, f"{label} nchunks"))
    c = at + 8
    for i in range(min(n, 4096)):
        if c + 12 > len(data):
            return None
        u, f, md = struct.unpack_from("<III", data, c)
        lay.fields += [(c, 4, f"{label} chunk {i} unfiltered_size"), (c + 4, 4, f"{label} chunk {i} filtered_size"),
                       (c + 8, 4, f"{label} chunk {i} metadata_size")]
        lay.boundaries += [c, c + 12, c + 12 + md]
        if f:
            lay.chunks.append((c + 12 + md, c + 12 + md + f, f"{label} chunk {i} data"))
        c += 12 + md + f
    return c


def layout(data: bytes, kind: str) -> Layout:
    lay = Layout()
    size = len(data)
    if kind in GENERIC_TILE_KINDS:
        _generic_tile(data, 0, "generic tile 0", lay)
    elif kind == "fragment_metadata":
        footer_start = size
        if size >= 8:
            flen = struct.unpack_from("<Q", data, size - 8)[0]
            if flen + 8 <= size:
                footer_start = size - 8 - flen
                lay.fields.append((size - 8, 8, "footer_length"))
                # footer fields are u64 offsets and sizes at the end of the footer: sample 8-byte windows
                for k in range(1, 17):
                    if size - 8 - 8 * k >= footer_start:
                        lay.fields.append((size - 8 - 8 * k, 8, f"footer u64 at end-{8 * k + 8}"))
                lay.boundaries.append(footer_start)
        at, k = 0, 0
        while at < footer_start:
            end = _generic_tile(data, at, f"metadata generic tile {k} at {at}", lay)
            if end is None:
                break
            at, k = end, k + 1
    elif kind in DATA_KINDS:
        at, k = 0, 0
        while at + 8 <= size:
            end = _chunks(data, at, size, f"tile {k} at {at}", lay)
            if end is None or end <= at:
                break
            lay.tiles.append((at, end, f"tile {k} at {at}"))
            lay.boundaries.append(at)
            at, k = end, k + 1
    lay.boundaries = sorted({b for b in lay.boundaries if 0 < b < size})
    lay.fields = [f for f in lay.fields if f[0] + f[1] <= size]
    return lay


def array_entries(root: Path) -> tuple[list[str], list[str]]:
    """(regular files, folders) of an array, relative paths, sorted; symlinks are not followed."""
    files, dirs = [], []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in dirnames:
            dirs.append(os.path.relpath(os.path.join(dirpath, d), root))
        for f in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(files), sorted(dirs)


# ---------------------------------------------------------------------------------------------
# damage

@dataclass
class Damage:
    seed: int
    array: str                 # pristine name
    family: str
    target: str                # path relative to the array root
    kind: str                  # classify(target), or "folder"
    action: dict               # what apply() does
    description: str           # for humans

    def __str__(self) -> str:
        return f"seed={self.seed} array={self.array} {self.description}"


def plan(seed: int, pristine: dict[str, Path]) -> Damage:
    """The damage of `seed`: deterministic given the seed and the pristine arrays' bytes."""
    rng = random.Random(seed)
    family = FAMILIES[seed % len(FAMILIES)]
    catalog = _catalog(pristine)
    # the kind of file first (so that rare kinds -- .con, .meta, enumerations -- come up as often
    # as data files), then an array that has one
    pool_name = "nonempty" if family in BYTE_FAMILIES else "files"
    kinds = sorted({k for c in catalog.values() for k in c[pool_name]})
    core = [k for k in ("fragment_metadata", "data", "var", "validity", "schema") if k in kinds]
    want_kind = rng.choice(core) if core and rng.random() < 0.5 else rng.choice(kinds)
    if family in ("junk",) or (family in ("delete", "symlink") and rng.random() < 0.3):
        name = rng.choice(sorted(pristine))
    else:
        name = rng.choice(sorted(n for n, c in catalog.items() if want_kind in c[pool_name]))
    root = Path(pristine[name])
    by_kind, nonempty, dirs = catalog[name]["files"], catalog[name]["nonempty"], catalog[name]["dirs"]
    frag_dirs = [d for d in dirs if d.startswith("__fragments/") and d.count("/") == 1]

    def pick_file(pool: dict[str, list[str]]) -> tuple[str, str]:
        kind = want_kind if want_kind in pool else rng.choice(sorted(pool))
        return rng.choice(pool[kind]), kind

    if family in BYTE_FAMILIES:
        rel, kind = pick_file(nonempty)
        data = (root / rel).read_bytes()
        return _plan_bytes(seed, rng, name, family, rel, kind, data)

    if family == "delete":
        if frag_dirs and rng.random() < 0.2:
            rel = rng.choice(frag_dirs)
            return Damage(seed, name, family, rel, "folder", {"op": "rmtree"}, f"delete fragment folder {rel}")
        rel, kind = pick_file(by_kind)
        return Damage(seed, name, family, rel, kind, {"op": "delete"}, f"delete {kind} file {rel}")

    if family == "junk":
        where = rng.choice(["fragment", "fragments", "root"])
        junk_name = rng.choice(["zz_extra.tdb", "junk.bin", "notes.txt", "__junk", ".hidden"])
        size = rng.choice([0, 1, 100, 5000])
        if where == "fragment" and frag_dirs:
            rel = f"{rng.choice(frag_dirs)}/{junk_name}"
        elif where == "fragments":
            rel = f"__fragments/{junk_name}"
        else:
            rel = junk_name
        folder = where == "fragments" and rng.random() < 0.3
        if folder:
            return Damage(seed, name, family, rel, "folder", {"op": "junk_dir", "size": size, "seed": seed},
                          f"extra folder {rel}/ holding a {size}-byte junk file")
        return Damage(seed, name, family, rel, "other", {"op": "junk", "size": size, "seed": seed},
                      f"extra {size}-byte junk file {rel}")

    if family == "symlink":
        if rng.random() < 0.4:
            folders = frag_dirs + [d for d in ("__meta", "__commits", "__schema", "__fragment_meta") if d in dirs]
            rel = rng.choice(folders)
            target = rng.choice(["secret_folder", "/etc", "fragment_copy_with_secret"]) if rel in frag_dirs \
                else rng.choice(["secret_folder", "/etc"])
            return Damage(seed, name, family, rel, "folder", {"op": "symlink", "target": target,
                                                              "relative": rng.random() < 0.3},
                          f"folder {rel} replaced by a symlink to {target}")
        rel, kind = pick_file(by_kind)
        target = rng.choice(["secret_file", "secret_file", "/etc", "/dev/zero", "/dev/zero", "/etc/passwd"])
        rel_link = target.startswith("secret") and rng.random() < 0.5
        return Damage(seed, name, family, rel, kind, {"op": "symlink", "target": target, "relative": rel_link},
                      f"{kind} file {rel} replaced by a {'relative ' if rel_link else ''}symlink to {target}")

    if family == "fifo":
        rel, kind = pick_file(by_kind)
        return Damage(seed, name, family, rel, kind, {"op": "fifo"}, f"{kind} file {rel} replaced by a FIFO")

    if family == "chardev":
        rel, kind = pick_file(by_kind)
        minor = rng.choice([3, 5])
        return Damage(seed, name, family, rel, kind, {"op": "chardev", "minor": minor},
                      f"{kind} file {rel} replaced by a character device (1,{minor}) "
                      f"({'/dev/null' if minor == 3 else '/dev/zero'})")
    raise AssertionError(family)


_CATALOGS: dict[tuple, dict] = {}


def _catalog(pristine: dict[str, Path]) -> dict[str, dict]:
    """name -> {"files": kind -> [rel], "nonempty": kind -> [rel], "dirs": [rel]} (cached)."""
    ck = tuple(sorted((n, str(p)) for n, p in pristine.items()))
    if ck not in _CATALOGS:
        out = {}
        for name, root in pristine.items():
            files, dirs = array_entries(Path(root))
            by_kind: dict[str, list[str]] = {}
            for rel in files:
                by_kind.setdefault(classify(rel), []).append(rel)
            nonempty = {k: [r for r in v if (Path(root) / r).stat().st_size > 0] for k, v in by_kind.items()}
            out[name] = {"files": by_kind, "nonempty": {k: v for k, v in nonempty.items() if v}, "dirs": dirs}
        _CATALOGS[ck] = out
    return _CATALOGS[ck]


def _plan_bytes(seed, rng, name, family, rel, kind, data: bytes) -> Damage:
    size = len(data)
    lay = layout(data, kind)
    mk = lambda action, desc: Damage(seed, name, family, rel, kind, action, f"{desc} in {kind} file {rel} ({size} bytes)")

    if family == "flip":
        choice = rng.random()
        if lay.fields and choice < 0.4:
            off, width, what = rng.choice(lay.fields)
            at = off + rng.randrange(width)
            where = f"field {what}"
        elif lay.chunks and choice < 0.75:
            s, e, what = rng.choice(lay.chunks)
            at = s if rng.random() < 0.3 else rng.randrange(s, e)
            where = f"compressed/filtered bytes of {what}"
        else:
            at = rng.randrange(size)
            where = "a random byte"
        n = min(rng.choice([1, 1, 2, 3]), size - at)
        masks = [rng.randrange(1, 256) for _ in range(n)]
        return mk({"op": "xor", "at": at, "masks": masks},
                  f"flip: xor {[hex(m) for m in masks]} at offset {at} ({where})")

    if family == "truncate":
        choice = rng.random()
        if lay.boundaries and choice < 0.5:
            at = rng.choice(lay.boundaries)
            where = "a structure boundary"
        elif choice < 0.6:
            at = size - 1
            where = "the last byte"
        elif choice < 0.7:
            at = 0
            where = "zero length"
        else:
            at = rng.randrange(size)
            where = "a random offset"
        return mk({"op": "truncate", "at": at}, f"truncate to {at} bytes ({where})")

    if family == "huge":
        value = rng.choice(HUGE_VALUES)
        if lay.fields and rng.random() < 0.75:
            off, width, what = rng.choice(lay.fields)
            where = f"field {what}"
        else:
            off, width, what = rng.randrange(max(1, size - 7)), 8, "random"
            where = "a random offset"
        if width >= 8 or size - off >= 8 and rng.random() < 0.5:
            width = min(8, size - off)
            raw = struct.pack("<Q", value)[:width]
            desc = f"huge: {width} bytes at offset {off} set to {value:#x} ({where})"
        else:
            width = min(4, size - off)
            raw = struct.pack("<I", 0xFFFFFFFF)[:width]
            desc = f"huge: u32 at offset {off} set to 0xffffffff ({where})"
        return mk({"op": "write", "at": off, "data": raw.hex()}, desc)

    if family == "swap":
        if len(lay.tiles) >= 2 and rng.random() < 0.8:
            a, b = sorted(rng.sample(range(len(lay.tiles)), 2))
            ra, rb = lay.tiles[a], lay.tiles[b]
            return mk({"op": "swap", "a": [ra[0], ra[1]], "b": [rb[0], rb[1]]},
                      f"swap: {ra[2]} [{ra[0]},{ra[1]}) <-> {rb[2]} [{rb[0]},{rb[1]})")
        if len(lay.chunks) >= 2:
            a, b = sorted(rng.sample(range(len(lay.chunks)), 2))
            ra, rb = lay.chunks[a], lay.chunks[b]
            if ra[1] <= rb[0]:
                return mk({"op": "swap", "a": [ra[0], ra[1]], "b": [rb[0], rb[1]]},
                          f"swap chunk data: {ra[2]} <-> {rb[2]}")
        n = max(1, min(rng.choice([4, 8, 16, 64]), size // 2))
        if size < 2:
            return mk({"op": "xor", "at": 0, "masks": [0xFF]}, "flip (file too small to swap): xor 0xff at 0")
        s1 = rng.randrange(0, size - 2 * n + 1)
        s2 = rng.randrange(s1 + n, size - n + 1)
        return mk({"op": "swap", "a": [s1, s1 + n], "b": [s2, s2 + n]},
                  f"swap: bytes [{s1},{s1 + n}) <-> [{s2},{s2 + n})")
    raise AssertionError(family)


def junk_bytes(n: int, seed: int) -> bytes:
    return random.Random(seed * 7919 + n).randbytes(n)


def make_outside(outside: Path, pristine_root: Path | None = None) -> dict[str, Path]:
    """Files outside the array that symlinks point at, every one holding SECRET:
    secret.txt, secret_folder/ (files named as a fragment's, and one named after the secret)."""
    outside.mkdir(parents=True, exist_ok=True)
    payload = (SECRET + "\n") * 64
    secret = outside / "secret.txt"
    secret.write_text(payload)
    folder = outside / "secret_folder"
    folder.mkdir(exist_ok=True)
    for n in ("__fragment_metadata.tdb", "a0.tdb", "a1.tdb", "a1_var.tdb", "d0.tdb", "__1_1_" + "0" * 32 + "_22",
              f"{SECRET}.tdb"):
        (folder / n).write_text(payload)
    return {"secret_file": secret, "secret_folder": folder}


def apply(d: Damage, root: Path, outside: Path) -> None:
    """Damage the copy at `root`; symlink targets are made under `outside`."""
    a = d.action
    path = root / d.target
    op = a["op"]
    if op == "none":
        return
    if op == "xor":
        with open(path, "r+b") as f:
            for i, m in enumerate(a["masks"]):
                f.seek(a["at"] + i)
                b = f.read(1)
                if not b:
                    break
                f.seek(a["at"] + i)
                f.write(bytes([b[0] ^ m]))
    elif op == "truncate":
        os.truncate(path, a["at"])
    elif op == "write":
        with open(path, "r+b") as f:
            f.seek(a["at"])
            f.write(bytes.fromhex(a["data"]))
    elif op == "swap":
        data = path.read_bytes()
        (s1, e1), (s2, e2) = a["a"], a["b"]
        out = data[:s1] + data[s2:e2] + data[e1:s2] + data[s1:e1] + data[e2:]
        path.write_bytes(out)
    elif op == "delete":
        os.remove(path)
    elif op == "rmtree":
        shutil.rmtree(path)
    elif op == "junk":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(junk_bytes(a["size"], a["seed"]))
    elif op == "junk_dir":
        path.mkdir(parents=True)
        (path / "junk.tdb").write_bytes(junk_bytes(a["size"], a["seed"]))
    elif op == "symlink":
        targets = make_outside(outside)
        t = a["target"]
        if t == "fragment_copy_with_secret":
            dst = outside / ("copy_of_" + os.path.basename(d.target))
            shutil.copytree(path, dst, symlinks=True)
            for f in sorted(dst.iterdir()):
                if f.name.endswith(".tdb") and f.name != "__fragment_metadata.tdb":
                    f.write_text((SECRET + "\n") * 64)
            (dst / f"{SECRET}.tdb").write_text(SECRET)
            target = dst
        elif t in targets:
            target = targets[t]
        else:
            target = Path(t)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            os.remove(path)
        link = os.path.relpath(target, path.parent) if a.get("relative") and not t.startswith("/") else str(target)
        os.symlink(link, path)
    elif op == "fifo":
        os.remove(path)
        os.mkfifo(path, 0o644)
    elif op == "chardev":
        os.remove(path)
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, a["minor"]))
    else:
        raise AssertionError(op)


def copy_pristine(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# ---------------------------------------------------------------------------------------------
# snapshots that never open anything but regular files

def safe_snapshot(root: str | os.PathLike) -> dict[str, tuple]:
    """Every entry under root, by lstat: regular files hashed (opened O_NOFOLLOW|O_NONBLOCK,
    checked to be regular after open), symlinks by target, FIFOs and devices by mode and rdev.
    Access times are left out."""
    root = os.fspath(root)
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        st = os.lstat(dirpath)
        out[os.path.relpath(dirpath, root)] = ("dir", st.st_mode, st.st_mtime_ns)
        for n in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            m = st.st_mode
            if stat.S_ISLNK(m):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(m):
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        out[rel] = ("changed-under-us", m)
                        continue
                    h = hashlib.sha256()
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b:
                            break
                        h.update(b)
                finally:
                    os.close(fd)
                out[rel] = ("file", st.st_size, st.st_mtime_ns, m, h.hexdigest())
            elif stat.S_ISFIFO(m):
                out[rel] = ("fifo", m, st.st_mtime_ns)
            elif stat.S_ISCHR(m) or stat.S_ISBLK(m):
                out[rel] = ("dev", m, st.st_rdev, st.st_mtime_ns)
            else:
                out[rel] = ("other", m, st.st_mtime_ns)
    return out


def diff_snapshots(before: dict, after: dict) -> list[str]:
    from mounting import diff_snapshots as diff
    return diff(before, after)


# ---------------------------------------------------------------------------------------------
# who opens what: inotify on the files the daemon must never open

class OpenWatch:
    """inotify (IN_OPEN | IN_ACCESS, not following symlinks) on paths: FIFOs and devices in the
    array, and the files and folders outside it that symlinks point at. events() lists
    (path, event) for every open or read since the watch began, by any process."""

    IN_ACCESS, IN_OPEN, IN_DONT_FOLLOW = 0x1, 0x20, 0x02000000

    def __init__(self, paths: Iterable[str | os.PathLike]):
        import ctypes
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.wds: dict[int, str] = {}
        for p in paths:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(os.fspath(p)),
                                              self.IN_OPEN | self.IN_ACCESS | self.IN_DONT_FOLLOW)
            if wd >= 0:
                self.wds[wd] = os.fspath(p)
        self._seen: list[tuple[str, str]] = []

    def events(self) -> list[tuple[str, str]]:
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not buf:
                break
            at = 0
            while at + 16 <= len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, at)
                name = buf[at + 16:at + 16 + n].split(b"\0", 1)[0].decode("utf-8", "replace")
                at += 16 + n
                path = self.wds.get(wd, f"wd {wd}") + (f"/{name}" if name else "")
                self._seen.append((path, "open" if mask & self.IN_OPEN else "read"))
        return list(self._seen)

    def close(self) -> None:
        os.close(self.fd)


def watch_targets(root: Path, outside: Path) -> list[str]:
    """Every FIFO and device in the array, every entry outside it."""
    out = []
    for base in (root, outside):
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            for n in filenames + dirnames:
                p = os.path.join(dirpath, n)
                m = os.lstat(p).st_mode
                if base == outside and not stat.S_ISLNK(m) or stat.S_ISFIFO(m) or stat.S_ISCHR(m) or stat.S_ISBLK(m):
                    out.append(p)
            if base == outside:
                out.append(dirpath)
    return out


# ---------------------------------------------------------------------------------------------
# the walker child: `damage.py --walk MNT SECRET [SUBPATH]`

def _walker_main(argv: list[str]) -> int:
    mnt, secret = argv[0], argv[1].encode()
    sub = argv[2] if len(argv) > 2 else ""
    try:
        import yaml
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    except ImportError:          # a bare interpreter (another user's): parse nothing
        yaml = None
    out = sys.stdout
    res: dict[str, Any] = {"files": 0, "dirs": 0, "links": 0, "bytes": 0, "errors": [], "eio": [],
                           "size_mismatch": [], "parse": [], "secret": [], "first": {}, "final": {},
                           "first_error": {}, "final_error": {}, "not_regular": []}

    def start(op: str, path: str) -> None:
        out.write(f"S\t{op}\t{path}\n")
        out.flush()

    def err(op: str, rel: str, exc: OSError) -> None:
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        if code == "EIO":
            res["eio"].append([op, rel])
        res["errors"].append([op, rel, code, str(exc)])

    def read_file(rel: str, expect_size: int | None):
        p = os.path.join(mnt, rel)
        start("read", rel)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            err("open", rel, exc)
            return None
        try:
            chunks = []
            n = 0
            cap = (expect_size or 0) + (4 << 20)
            while n <= cap:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
                n += len(b)
            data = b"".join(chunks)
            fst = os.fstat(fd)
        except OSError as exc:
            err("read", rel, exc)
            return None
        finally:
            os.close(fd)
        res["files"] += 1
        res["bytes"] += len(data)
        if expect_size is not None and (expect_size != len(data) or fst.st_size != len(data)):
            res["size_mismatch"].append([rel, expect_size, fst.st_size, len(data)])
        if secret in data:
            res["secret"].append([rel, data.index(secret)])
        return data

    def check_content(rel: str, data: bytes) -> None:
        if rel.endswith(".yaml") and yaml is not None:
            start("parse", rel)
            try:
                yaml.load(data, Loader=loader)
            except Exception as exc:  # noqa: BLE001
                res["parse"].append([rel, "yaml", f"{type(exc).__name__}: {str(exc)[:300]}"])
        elif rel.endswith(".csv"):
            start("parse", rel)
            try:
                rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
                widths = {len(r) for r in rows}
                if len(widths) > 1:
                    bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
                    res["parse"].append([rel, "csv", f"column counts {sorted(widths)}; row {bad} has {len(rows[bad])}"
                                                     f" columns, the header {len(rows[0])}: {rows[bad][:8]}"])
            except Exception as exc:  # noqa: BLE001
                res["parse"].append([rel, "csv", f"{type(exc).__name__}: {str(exc)[:300]}"])

    def summary(rel: str, into: str) -> None:
        try:
            st = os.stat(os.path.join(mnt, rel))
        except OSError as exc:
            err("stat", rel, exc)
            res[into + "_error"][rel] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            return
        data = read_file(rel, st.st_size)
        if data is None:
            res[into + "_error"][rel] = res["errors"][-1][2]
            return
        res[into][rel] = data.decode("utf-8", "replace")

    # 1. the first read of array.yaml, before anything else
    if not sub:
        summary("array.yaml", "first")

    # 2. every path, depth first, fragment.yaml first in each folder
    def walk(rel: str) -> None:
        start("listdir", rel)
        try:
            names = os.listdir(os.path.join(mnt, rel))
        except OSError as exc:
            err("listdir", rel, exc)
            return
        res["dirs"] += 1
        names.sort(key=lambda n: (n != "fragment.yaml", n))
        for n in names:
            crel = f"{rel}/{n}" if rel else n
            if secret in n.encode("utf-8", "surrogateescape"):
                res["secret"].append([crel, "in a file name"])
            start("lstat", crel)
            try:
                st = os.lstat(os.path.join(mnt, crel))
            except OSError as exc:
                err("lstat", crel, exc)
                continue
            if stat.S_ISLNK(st.st_mode):
                res["links"] += 1
                start("readlink", crel)
                try:
                    target = os.readlink(os.path.join(mnt, crel))
                    if secret in target.encode("utf-8", "surrogateescape"):
                        res["secret"].append([crel, "in a symlink target"])
                except OSError as exc:
                    err("readlink", crel, exc)
            elif stat.S_ISDIR(st.st_mode):
                walk(crel)
            elif stat.S_ISREG(st.st_mode):
                data = read_file(crel, st.st_size)
                if data is not None:
                    check_content(crel, data)
                    if n == "fragment.yaml" and crel.startswith("fragments/"):
                        res["first"].setdefault(crel, data.decode("utf-8", "replace"))
            else:
                res["not_regular"].append([crel, oct(st.st_mode)])

    walk(sub)

    # 3. after the walk: every fragment.yaml, then array.yaml (so it is the newest)
    if not sub:
        start("listdir", "fragments")
        try:
            frags = sorted(os.listdir(os.path.join(mnt, "fragments")))
        except OSError as exc:
            err("listdir", "fragments", exc)
            frags = []
        for f in frags:
            summary(f"fragments/{f}/fragment.yaml", "final")
        summary("array.yaml", "final")
    out.write("R\t" + json.dumps(res) + "\n")
    out.flush()
    return 0


@dataclass
class WalkOutcome:
    result: dict | None            # the walker's report, None when it hung or crashed
    hung: str | None = None        # "op path" that did not return within OP_TIMEOUT
    crashed: str | None = None
    ops: int = 0
    seconds: float = 0.0


def walk_mount(mnt: str | os.PathLike, *, sub: str = "", user: tuple[int, int] | None = None,
               op_timeout: float = OP_TIMEOUT, total_timeout: float = WALK_TIMEOUT,
               python: str | None = None) -> WalkOutcome:
    """Walk and read every path of the mount in a child process; a child that is silent for
    op_timeout seconds is killed and the operation it was in is reported as hung.
    `user`: (uid, gid) to run the walk as (setpriv, no supplementary groups)."""
    cmd = [python or sys.executable, os.path.abspath(__file__), "--walk", os.fspath(mnt), SECRET]
    if sub:
        cmd.append(sub)
    if user is not None:
        cmd = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *cmd]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd="/", start_new_session=True)
    buf = b""
    last = "start"
    ops = 0
    result = None
    hung = None
    fd = proc.stdout.fileno()
    deadline_total = t0 + total_timeout
    last_progress = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            wait = min(op_timeout - (now - last_progress), deadline_total - now)
            if wait <= 0:
                hung = last if now < deadline_total else f"whole walk over {total_timeout:.0f} s (at {last})"
                break
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            last_progress = time.monotonic()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"S\t"):
                    ops += 1
                    last = line[2:].decode("utf-8", "replace").replace("\t", " ")
                elif line.startswith(b"R\t"):
                    result = json.loads(line[2:])
    finally:
        if hung is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            _, stderr = proc.communicate(timeout=op_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
    outcome = WalkOutcome(result, hung=hung, ops=ops, seconds=time.monotonic() - t0)
    if result is None and hung is None:
        outcome.crashed = f"walker exited {proc.returncode} at {last}: {stderr.decode('utf-8', 'replace')[-800:]}"
    return outcome


# ---------------------------------------------------------------------------------------------
# the daemon

def daemon_pid(mnt: str | os.PathLike) -> int | None:
    """The pid of the tdbfs daemon serving `mnt` (`tdbfs.cli mount -f --spawned ... ARRAY MNT`)."""
    from mounting import daemon_pids
    found = daemon_pids(mnt, spawned_only=True)
    return found[0] if found else None


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    st = proc_status(pid).get("State", "")
    return bool(st) and not st.startswith(("Z", "X"))


def kill_daemon(pid: int | None, wait: float = 3.0) -> None:
    """After an unmount: the daemon should exit; if it does not (it hangs), SIGKILL it by pid."""
    if pid is None:
        return
    deadline = time.monotonic() + wait
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


import contextlib


@contextlib.contextmanager
def mount_tracked(array: str | os.PathLike, *, fast_unmount: bool = False, **kw):
    """tests/mounting.mounted, and afterwards the daemon stopped by its pid if it outlived the
    unmount (a daemon stuck in an open() never would exit). fast_unmount: unmount with
    fusermount3 -u -z directly, not `tdbfs umount` (one interpreter start less per mount)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    from mounting import mounted, tdbfs_command
    if fast_unmount:
        kw.setdefault("command", tdbfs_command() + ["mount"])
    made = kw.get("mountpoint") is None
    mnt_dir = Path(tempfile.mkdtemp(prefix="tdbfs-mnt-")) if made else Path(kw["mountpoint"])
    kw["mountpoint"] = mnt_dir
    pid = None
    try:
        with mounted(array, **kw) as mnt:
            pid = daemon_pid(mnt)
            yield mnt
    finally:
        # also a daemon whose mount never answered (found by its mount point)
        kill_daemon(pid or daemon_pid(mnt_dir))
        if made:
            with contextlib.suppress(OSError):
                mnt_dir.rmdir()


def read_view(path: str | os.PathLike, timeout: float = OP_TIMEOUT) -> tuple[bytes | None, int | None, int, int]:
    """stat, open, read to EOF and fstat one view in a helper thread; (bytes or None, errno or None,
    st_size, fstat size). An operation that does not return within `timeout` raises TimeoutError
    (the thread is left blocked; the mount's teardown releases it)."""
    import threading
    box: dict = {}

    def run():
        try:
            st = os.stat(path)
            box["st"] = st.st_size
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                chunks = []
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    chunks.append(b)
                box["fst"] = os.fstat(fd).st_size
            finally:
                os.close(fd)
            box["data"] = b"".join(chunks)
        except OSError as exc:
            box["errno"] = exc.errno
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"reading {path} did not return within {timeout:.0f} s")
    return box.get("data"), box.get("errno"), box.get("st", -1), box.get("fst", -1)


# ---------------------------------------------------------------------------------------------
# problems

def problems_of(yaml_text: str | None) -> tuple[list | None, str | None]:
    """The `problems` list of a YAML summary, or (None, why not)."""
    import yaml
    if yaml_text is None:
        return None, "not read"
    try:
        doc = yaml.load(yaml_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception as exc:  # noqa: BLE001
        return None, f"does not parse: {type(exc).__name__}: {str(exc)[:200]}"
    if not isinstance(doc, dict) or "problems" not in doc:
        return None, f"has no `problems` key (top-level keys: {list(doc)[:20] if isinstance(doc, dict) else type(doc).__name__})"
    probs = doc["problems"]
    if probs is None:
        probs = []
    if not isinstance(probs, list):
        return None, f"`problems` is a {type(probs).__name__}, not a list"
    return probs, None


def bad_problem(p: Any) -> str | None:
    """Why a problem entry breaks the contract, or None."""
    if not isinstance(p, dict):
        return f"not a mapping: {p!r}"
    missing = [k for k in PROBLEM_KEYS if k not in p]
    if missing:
        return f"missing {missing}: {p}"
    if not isinstance(p["file"], str) or p["file"].startswith("/") or ".." in p["file"].split("/"):
        return f"`file` is not a path relative to the array root: {p['file']!r}"
    if not isinstance(p["structure"], str) or not isinstance(p["message"], str) or not p["message"]:
        return f"`structure`/`message` not strings: {p}"
    off = p["offset"]
    if off is not None and (isinstance(off, bool) or not isinstance(off, int) or off < 0):
        return f"`offset` is not a non-negative integer or null: {off!r}"
    if p["severity"] not in ("error", "warning"):
        return f"`severity` is {p['severity']!r}, not error or warning"
    return None


def key(p: dict) -> tuple:
    return tuple(p.get(k) for k in PROBLEM_KEYS)


def fmt(p: dict | tuple) -> str:
    t = key(p) if isinstance(p, dict) else p
    return f"{t[0]}:{'-' if t[2] is None else t[2]}: {t[1]}: {t[3]} [{t[4]}]"


#: view folder -> array folder, for views outside fragments/
VIEW_FOLDERS = (("schema/enumerations", "__schema/__enumerations"), ("schema", "__schema"), ("commits", "__commits"),
                ("metadata", "__meta"), ("fragment_meta", "__fragment_meta"), ("labels", "__labels"))


def explaining_files(view: str) -> tuple[str, str] | None:
    """For an EIO view: (exact file, folder) a problem must name -- the problem's file must equal
    `exact` or lie under it, or, when exact is "", lie under `folder`. None: the view may never be EIO."""
    parts = view.split("/")
    if parts[0] == "fragments" and len(parts) >= 2:
        return f"__fragments/{parts[1]}", "__fragments"
    if parts[0] == "as_of" and len(parts) >= 3 and parts[2] in ("cells.csv", "cells"):
        return "", "*"   # the cells a reader returns come from every fragment read, the schema and the deletes
    if parts[0] == "as_of" and len(parts) >= 3:   # as_of/<T>/: the schema in force, or the metadata
        return "", "__meta" if parts[2] == "metadata.yaml" else "__schema"
    for vf, af in VIEW_FOLDERS:
        if view == vf or view.startswith(vf + "/"):
            rest = view[len(vf) + 1:]
            if rest and "/" not in rest and rest.endswith(".yaml") and rest not in ("merged.yaml", "current.yaml"):
                return f"{af}/{rest[:-5]}", af
            return "", af
    return None


def explained(view: str, problems: list[dict]) -> bool:
    want = explaining_files(view)
    if want is None:
        return False
    exact, folder = want
    files = [p.get("file") or "" for p in problems if isinstance(p, dict)]
    if exact:
        ok = any(f == exact or f.startswith(exact + "/") for f in files)
        if not ok and view.startswith("fragments/"):
            # legacy layouts keep fragments at the root
            name = exact.split("/", 1)[1]
            ok = any(f == name or f.startswith(name + "/") for f in files)
        return ok
    if folder == "*":
        return bool(files)
    return any(f == folder or f.startswith(folder + "/") for f in files)


def related(p: dict, d: Damage) -> bool:
    """Does problem p name the damage d: its `file` is the damaged file, a folder holding it, a file
    in it, or -- for a commit file -- the fragment it commits; or its message names the damaged
    file (a fragment's footer naming a deleted schema, say)?"""
    t = d.target
    pfile = p.get("file") or ""
    base = os.path.basename(t)
    msg = str(p.get("message") or "")
    if t in msg or (len(base) >= 20 and base in msg):
        return True
    if not pfile:
        return False
    if pfile == t or t.startswith(pfile + "/") and pfile not in ("__fragments", "__commits", "__meta", "__schema") \
            or pfile.startswith(t + "/"):
        return True
    if t.startswith("__commits/"):
        frag = os.path.basename(t).rsplit(".", 1)[0]
        return os.path.basename(pfile) == frag or pfile.startswith(f"__fragments/{frag}/")
    return False


def fragment_view_of(d: Damage) -> str | None:
    parts = d.target.split("/")
    if parts[0] == "__fragments" and len(parts) >= 2 and parts[1].startswith("__") and \
            (len(parts) > 2 or d.kind == "folder") and not parts[1].startswith("__junk"):
        return f"fragments/{parts[1]}/fragment.yaml"
    if parts[0] == "__commits" and d.kind == "commit_wrt":
        return f"fragments/{os.path.basename(d.target).rsplit('.', 1)[0]}/fragment.yaml"
    return None


# ---------------------------------------------------------------------------------------------
# one damaged copy, end to end

@dataclass
class Failure:
    category: str
    seed: int
    damage: str
    path: str
    expected: str
    found: str

    def __str__(self) -> str:
        return (f"[{self.category}] seed={self.seed}: {self.damage}\n    path: {self.path}\n"
                f"    expected: {self.expected}\n    found: {self.found}")


@dataclass
class CopyResult:
    damage: Damage
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    walk: WalkOutcome | None = None
    rss_peak: int | None = None
    check_problems: list | None = None
    mount_problems: list | None = None
    workdir: str = ""


def _tdbfs() -> list[str]:
    return [sys.executable, "-m", "tdbfs.cli"]


def run_check(array: str | os.PathLike, timeout: float = CHECK_TIMEOUT) -> tuple[dict | None, str | None, float]:
    """`tdbfs check --json ARRAY` -> (document, error, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(_tdbfs() + ["check", "--json", os.fspath(array)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    try:
        out, errs = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, f"did not return within {timeout:.0f} s", time.monotonic() - t0
    secs = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        return None, f"exit status {proc.returncode}: {errs.decode('utf-8', 'replace')[-800:]}", secs
    try:
        return json.loads(out), None, secs
    except ValueError as exc:
        return None, f"stdout is not JSON ({exc}): {out[:300]!r}", secs


def run_copy(d: Damage, pristine: dict[str, Path], workdir: str | os.PathLike, *, keep: bool = False) -> CopyResult:
    """Copy d.array, damage it, mount it, walk everything, check it; every contract breach is a Failure."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)

    t0 = time.monotonic()
    res = CopyResult(d)
    work = Path(tempfile.mkdtemp(prefix=f"seed{d.seed}-", dir=workdir))
    res.workdir = str(work)
    array = work / "array"
    outside = work / "outside"
    desc = str(d.description)

    def fail(category: str, path: str, expected: str, found: str) -> None:
        res.failures.append(Failure(category, d.seed, f"array={d.array} {desc}", path, expected, found))

    try:
        copy_pristine(Path(pristine[d.array]), array)
        make_outside(outside)
        apply(d, array, outside)
        before = safe_snapshot(array), safe_snapshot(outside)
        watch = OpenWatch(watch_targets(array, outside))

        walk = None
        pid = None
        alive_ok = None
        try:
            with mount_tracked(array, fast_unmount=True) as mnt:
                pid = daemon_pid(mnt)
                walk = walk_mount(mnt)
                res.walk = walk
                if walk.hung:
                    fail("hang", walk.hung, f"every operation returns within {OP_TIMEOUT:.0f} s",
                         f"no answer after {OP_TIMEOUT:.0f} s (the walk was killed; {walk.ops} operations before)")
                elif walk.crashed:
                    fail("walker-crash", "", "the walker finishes", walk.crashed)
                if walk.hung:
                    # the mount is stuck: stop the daemon we started, so the unmount cannot hang
                    if pid is not None:
                        os.kill(pid, signal.SIGKILL)
                else:
                    st = proc_status(pid) if pid else {}
                    hwm = st.get("VmHWM", "")
                    if hwm.endswith("kB"):
                        res.rss_peak = int(hwm.split()[0]) * 1024
                        if res.rss_peak > RSS_BOUND:
                            fail("rss", f"pid {pid}", f"daemon peak RSS (VmHWM) <= {RSS_BOUND >> 20} MiB",
                                 f"{res.rss_peak / 2**20:.0f} MiB")
                    try:
                        ls = subprocess.run(["ls", os.fspath(mnt)], capture_output=True, text=True, timeout=OP_TIMEOUT)
                        alive_ok = ls.returncode == 0 and "array.yaml" in ls.stdout
                        ls_out = f"rc={ls.returncode} stdout={ls.stdout.split()} stderr={ls.stderr.strip()}"
                    except subprocess.TimeoutExpired:
                        alive_ok, ls_out = False, f"ls did not return within {OP_TIMEOUT:.0f} s"
                    if pid is None or not alive(pid) or not alive_ok:
                        fail("daemon-died", "", "after the walk the daemon is alive and `ls MNT` answers",
                             f"pid={pid} alive={alive(pid)}; ls: {ls_out}")
        except AssertionError as exc:       # mount failed, or could not unmount
            fail("mount", "", "`tdbfs mount` succeeds and the mount is removed at the end", str(exc)[:1500])
        finally:
            kill_daemon(pid)      # mount_tracked did too; a no-op when the daemon is gone

        check_doc, check_err, check_secs = run_check(array)
        if check_err:
            fail("check-hang" if "did not return" in check_err else "check-crash", "tdbfs check --json",
                 "a JSON report within the time limit", check_err)
        opened = watch.events()
        watch.close()
        if opened:
            fail("opened-non-regular", opened[0][0], "no process opens or reads a FIFO, a device or anything a "
                 "symlink points at (mount and check)", f"{len(opened)} inotify events: {sorted(set(opened))[:6]}")

        after = safe_snapshot(array), safe_snapshot(outside)
        diff = diff_snapshots(before[0], after[0]) + ["outside: " + x for x in diff_snapshots(before[1], after[1])]
        if diff:
            fail("array-written", "", "the array and the files outside it byte-identical before and after",
                 "; ".join(diff[:10]))

        if walk is not None and walk.result is not None:
            _judge_walk(d, walk.result, check_doc, fail, res, array)
    except Exception:  # noqa: BLE001 -- a broken harness step is a failure of this copy, reported
        import traceback
        fail("harness", "", "the copy is damaged, mounted and walked", traceback.format_exc()[-1500:])
    finally:
        res.seconds = time.monotonic() - t0
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return res


MISSING_WORDS = ("missing", "not there", "does not exist", "no such", "not found", "is gone", "absent")


def names_a_real_path(p: dict, array: Path, d: Damage) -> bool:
    """A problem's `file` is a path of the damaged array (relative to its root), or the damaged
    path itself, or a file the message says is missing."""
    f = p.get("file") or ""
    if f in ("", ".") or os.path.lexists(array / f):
        return True
    if f == d.target or f.startswith(d.target + "/") or d.target.startswith(f + "/"):
        return True
    msg = str(p.get("message", "")).lower()
    return any(w in msg for w in MISSING_WORDS) and os.path.isdir(array / os.path.dirname(f))


def _judge_walk(d: Damage, r: dict, check_doc: dict | None, fail, res: CopyResult, array: Path) -> None:
    for op, rel, code, msg in r["errors"]:
        if code not in ("EIO", "ENOENT"):
            fail("errno", rel, f"{op}: only EIO or ENOENT", f"{code}: {msg}")
    for rel, stat_size, fstat_size, n in r["size_mismatch"]:
        fail("size-mismatch", rel, "st_size == bytes read", f"stat {stat_size}, fstat {fstat_size}, read {n} bytes")
    for rel, what, msg in r["parse"]:
        fail(f"{what}-parse", rel, f"parses as {what.upper()}" + (" with one column count" if what == "csv" else ""),
             msg)
    for rel, where in r["secret"]:
        fail("secret-leak", rel, f"the outside marker {SECRET!r} never appears", f"found at {where}")
    for rel, mode in r["not_regular"]:
        fail("not-regular-view", rel, "views are files, folders or symlinks", f"mode {mode}")

    # the summaries after the walk
    final_array = r["final"].get("array.yaml")
    if final_array is None:
        fail("summary-eio", "array.yaml", "array.yaml readable after the walk",
             r["final_error"].get("array.yaml", "not read"))
    probs, why = problems_of(final_array)
    if final_array is not None and probs is None:
        fail("problems-format", "array.yaml", "a `problems` list", why)
    probs = probs or []
    res.mount_problems = probs
    for where, plist in [("array.yaml (after the walk)", probs),
                         ("array.yaml (first read)", problems_of(r["first"].get("array.yaml"))[0] or [])] + [
            (f"{rel} (after the walk)", problems_of(t)[0] or []) for rel, t in r["final"].items() if rel != "array.yaml"]:
        for p in plist:
            why = bad_problem(p)
            if why:
                fail("problems-format", where, "every problem has file, structure, offset, message, severity", why)
    good = [p for p in probs if isinstance(p, dict)]
    for p in good:
        if not names_a_real_path(p, array, d):
            fail("problem-file-not-in-array", "array.yaml", "`file` is a path relative to the array root "
                 "(an existing one, or one the message calls missing)", fmt(p))

    # every fragment.yaml problem is collected in array.yaml
    keys = {key(p) for p in good}
    for rel, text in r["final"].items():
        if rel == "array.yaml":
            continue
        fp, why = problems_of(text)
        if fp is None:
            fail("problems-format", rel, "a `problems` list", why)
            continue
        missing = [p for p in fp if isinstance(p, dict) and key(p) not in keys]
        if missing:
            fail("fragment-not-in-array", rel, "every problem of fragment.yaml is in array.yaml (read after it)",
                 f"{len(missing)} missing, e.g. {fmt(missing[0])}")

    # every EIO is explained by a problem
    seen = set()
    for op, rel in r["eio"]:
        if rel in seen:
            continue
        seen.add(rel)
        if rel in ("array.yaml",) or rel.endswith("array.yaml"):
            continue          # reported as summary-eio
        if explaining_files(rel) is None:
            fail("eio-forbidden", rel, "this view never reads as EIO", f"{op}: EIO")
        elif not explained(rel, good):
            exact, folder = explaining_files(rel)
            fail("eio-unexplained", rel, f"a problem in array.yaml whose file is {exact or folder + '/...'}"
                                         f"{' or inside it' if exact else ''}",
                 f"{op}: EIO; array.yaml's problems name: {sorted({p.get('file') for p in good})[:8]}")
    if r["first_error"].get("array.yaml"):
        fail("summary-eio", "array.yaml", "the first read of array.yaml succeeds", r["first_error"]["array.yaml"])

    # listing-level damage is in the first read of array.yaml (and of the fragment's fragment.yaml)
    if (d.family in LISTING_FAMILIES and (d.family != "delete" or d.kind in DETECTABLE_DELETES)) or \
            (d.family == "truncate" and d.kind in DATA_KINDS):
        first, why = problems_of(r["first"].get("array.yaml"))
        if first is not None and not any(isinstance(p, dict) and related(p, d) for p in first):
            fail("early-finding", "array.yaml (first read, before any other view)",
                 f"a problem naming {d.target} (found from listings and stat alone)",
                 f"{len(first)} problems: {[fmt(p) for p in first if isinstance(p, dict)][:5]}")
        fv = fragment_view_of(d)
        if fv and fv in r["first"]:
            fprobs, why = problems_of(r["first"][fv])
            if fprobs is not None and not any(isinstance(p, dict) and related(p, d) for p in fprobs):
                fail("early-finding", f"{fv} (first read)", f"a problem naming {d.target}",
                     f"{len(fprobs)} problems: {[fmt(p) for p in fprobs if isinstance(p, dict)][:5]}")
        # and after the walk, in any case
        if final_array is not None and not any(related(p, d) for p in good):
            fail("finding-missing", "array.yaml (after the walk)", f"a problem naming {d.target}",
                 f"{len(good)} problems: {[fmt(p) for p in good][:5]}")

    # the mount and `tdbfs check` report the same findings
    if check_doc is not None and final_array is not None:
        cprobs = check_doc.get("problems")
        if not isinstance(cprobs, list):
            fail("problems-format", "tdbfs check --json", "a `problems` list", repr(cprobs)[:200])
            return
        res.check_problems = cprobs
        for p in cprobs:
            why = bad_problem(p)
            if why:
                fail("problems-format", "tdbfs check --json", "every problem has the five keys", why)
        ck = {key(p) for p in cprobs if isinstance(p, dict)}
        only_check = sorted(ck - keys, key=str)
        only_mount = sorted(keys - ck, key=str)
        if only_check or only_mount:
            fail("check-vs-mount", "array.yaml vs tdbfs check --json",
                 "the same set of (file, structure, offset, message, severity)",
                 f"{len(only_check)} only in check, e.g. {[fmt(t) for t in only_check[:3]]}; "
                 f"{len(only_mount)} only in the mount, e.g. {[fmt(t) for t in only_mount[:3]]}")


# ---------------------------------------------------------------------------------------------
# many copies

def run_many(seeds: Iterable[int], pristine: dict[str, Path], workdir: str | os.PathLike, *, workers: int = 2,
             keep: bool = False, progress=None) -> list[CopyResult]:
    from concurrent.futures import ThreadPoolExecutor
    seeds = list(seeds)
    plans = [plan(s, pristine) for s in seeds]
    out: list[CopyResult] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for r in pool.map(lambda d: run_copy(d, pristine, workdir, keep=keep), plans):
            out.append(r)
            if progress:
                progress(r)
    return out


def report(results: list[CopyResult], limit_per_category: int = 3) -> str:
    """Failures grouped by category: count, copies affected, and examples (seed, damage, details)."""
    by: dict[str, list[Failure]] = {}
    for r in results:
        for f in r.failures:
            by.setdefault(f.category, []).append(f)
    if not by:
        return f"{len(results)} damaged copies: no failures"
    lines = [f"{sum(1 for r in results if r.failures)} of {len(results)} damaged copies failed", "",
             f"{'category':<28} {'failures':>8} {'copies':>7}  seeds (first 12)"]
    for cat in sorted(by, key=lambda c: -len(by[c])):
        fs = by[cat]
        seeds = sorted({f.seed for f in fs})
        lines.append(f"{cat:<28} {len(fs):>8} {len(seeds):>7}  {seeds[:12]}")
    for cat in sorted(by, key=lambda c: -len(by[c])):
        lines.append("")
        lines.append(f"== {cat}")
        shown = set()
        for f in by[cat]:
            if f.seed in shown:
                continue
            shown.add(f.seed)
            lines.append(str(f))
            if len(shown) >= limit_per_category:
                break
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--walk":
        sys.exit(_walker_main(sys.argv[2:]))
    sys.exit("usage: damage.py --walk MNT SECRET [SUBPATH]   (scripts/damage runs the damage suite)")
