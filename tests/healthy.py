"""The registry of healthy arrays: everything the suite writes that TileDB (or TileDB 0.x, or tiledbsoma)
wrote and nothing damaged, for the rule "healthy means silent" (tests/test_healthy_silent.py): each shows
`problems: []` in every array.yaml, fragment.yaml and group.yaml, and `tdbfs check` exits 0 without a
warning line.

    for h in build(base):            # every source, each into its own folder under `base`
        h.name, h.location, h.env    # a unique name; a local path (or URL); environment tdbfs needs

A source is a function `source(base: Path) -> list[Healthy]` registered under a name; a test module
that writes (or ships) more healthy arrays adds them where it builds them:

    @healthy.source("my_arrays")
    def _mine(base):
        return [healthy.Healthy("my_arrays/one", str(build_one(base / "one")))]

Sources reuse the builders of tests/arrays.py, history_arrays.py, groups.py, legacy0x_arrays.py and
the back-compat corpus (corpus.py); `REMOTE` lists the local objects also uploaded to the object-store
emulators (tests/s3_server.py, object_emulators.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import tiledb

import arrays
import corpus
import groups
import history_arrays


@dataclass(frozen=True)
class Healthy:
    name: str                   # unique: "<source>/<what>"
    location: str               # a local path, or an object store's URL
    env: dict = field(default_factory=dict)   # environment tdbfs needs (a key, an endpoint)
    kind: str = "array"         # array | group | workspace

    @property
    def local(self) -> bool:
        return "://" not in self.location


Source = Callable[[Path], list]
#: source name -> builder, in registration order
SOURCES: dict[str, Source] = {}


def source(name: str) -> Callable[[Source], Source]:
    def register(fn: Source) -> Source:
        if name in SOURCES:
            raise ValueError(f"healthy source {name!r} registered twice")
        SOURCES[name] = fn
        return fn
    return register


def build(base: Path, names=None) -> list[Healthy]:
    """Every healthy object of the given sources (default: all), each source in base/<name>."""
    out: list[Healthy] = []
    for name in names or list(SOURCES):
        folder = Path(base) / name
        folder.mkdir(parents=True, exist_ok=True)
        out.extend(SOURCES[name](folder))
    seen = [h.name for h in out]
    dupes = {n for n in seen if seen.count(n) > 1}
    assert not dupes, f"healthy names used twice: {sorted(dupes)}"
    return out


def _local(prefix: str, built, kind: str = "array", env=None) -> Healthy:
    path = built.path if hasattr(built, "path") else built
    return Healthy(f"{prefix}/{Path(path).name}", str(path), dict(env or {}), kind)


# -- tests/arrays.py: every kind, every layout --------------------------------------------------------

#: name -> (kind, options) besides arrays.SAMPLE_SET: the kinds' other options
MORE_KINDS: dict[str, tuple[str, dict]] = {
    "sparse_colmajor": ("sparse", dict(ndim=2, cell_order="col-major", tile_order="col-major")),
    "sparse_duplicates": ("sparse", dict(ndim=2, allows_duplicates=True)),
    "sparse_pipelines": ("sparse", dict(ndim=2, coords_filters="DELTA+ZSTD", offsets_filters="DOUBLE_DELTA+LZ4",
                                        validity_filters="RLE", dim_filters="BITSHUFFLE+GZIP")),
    "dense_pipelines": ("dense", dict(ndim=2, offsets_filters="BYTESHUFFLE+ZSTD", validity_filters="GZIP")),
    "dense_uint8_dims": ("dense", dict(ndim=1, dim_dtype=np.uint8, low=0, extent=5, tiles_per_dim=4)),
    "var_strings_sparse": ("var_strings", dict(sparse=True)),
    "var_strings_dense": ("var_strings", dict(sparse=False)),
    "consolidated_dense_vacuumed": ("consolidated", dict(sparse=False, vacuum_after=True)),
    "consolidated_overlap_duplicates": ("consolidated", dict(overlap=True, allows_duplicates=True,
                                                             vacuum_after=True)),
    "consolidated_overlap": ("consolidated", dict(overlap=True, vacuum_after=True)),
    "deletes_unconsolidated": ("deletes", dict(consolidate_after=False)),
    "deletes_purged_vacuumed": ("deletes", dict(purge=True, vacuum_after=True)),
    "deletes_vacuumed": ("deletes", dict(vacuum_after=True)),
    "commits_vacuumed": ("commits", dict(vacuum_commits=True)),
    "commits_only": ("commits", dict(vacuum_commits=True, then_fragments=False)),
    "fragment_meta_dense_vacuumed": ("fragment_meta", dict(sparse=False, vacuum_after=True)),
    "schema_evolution_dense": ("schema_evolution", dict(sparse=False)),
    "enumerations_unextended": ("enumerations", dict(extend=False)),
    "metadata_consolidated": ("metadata", dict(consolidate_meta=True)),
    "metadata_consolidated_vacuumed": ("metadata", dict(consolidate_meta=True, vacuum_meta=True)),
}


@source("kinds")
def _kinds(base: Path) -> list[Healthy]:
    out = [_local("kinds", b) for b in arrays.build_sample_set(base).values()]
    for name, (kind, options) in MORE_KINDS.items():
        out.append(_local("kinds", arrays.make_array(base, kind, name=name, **options)))
    return out


def write_empty(path: Path, sparse: bool) -> Path:
    """An array just created: its schema, no fragment (and in TileDB 2.30 its empty folders)."""
    dim = tiledb.Dim("d0", domain=(0, 99), tile=10, dtype=np.int64)
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=tiledb.Domain(dim), sparse=sparse,
                                                      attrs=[tiledb.Attr("a0", dtype=np.int32)]))
    return path


@source("empty")
def _empty(base: Path) -> list[Healthy]:
    return [_local("empty", write_empty(base / name, name == "sparse")) for name in ("sparse", "dense")]


@source("encrypted")
def _encrypted(base: Path) -> list[Healthy]:
    env = {"TDBFS_ENCRYPTION_KEY": arrays.ENCRYPTION_KEY}
    return [_local("encrypted", arrays.make_array(base, "encrypted", name=name, **options), env=env)
            for name, options in (("sparse", {}), ("dense", dict(sparse=False)),
                                  ("var_strings", dict(var_strings=True)))]


# -- history: consolidation, vacuum, commits, fragment and array metadata at explicit times --------------

#: name -> build_history options
HISTORIES: dict[str, dict] = {
    "sparse_none": dict(),
    "sparse_partial": dict(consolidation="partial"),
    "sparse_partial_vacuumed": dict(consolidation="partial", vacuum=True),
    "sparse_full_everything": dict(consolidation="full", vacuum=True, commits=True, fragment_meta=True,
                                   array_meta=True),
    "sparse_full": dict(consolidation="full", commits=True),
    "dense_full_vacuumed": dict(dense=True, consolidation="full", vacuum=True, fragment_meta=True),
    "dense_partial": dict(dense=True, consolidation="partial", array_meta=True),
}


@source("history")
def _history(base: Path) -> list[Healthy]:
    out = []
    for name, options in HISTORIES.items():
        history_arrays.build_history(base / name, **options)
        out.append(_local("history", base / name))
    return out


# -- filters: every filter of arrays.FILTERS, alone and in pipelines, on attributes, coordinates,
# offsets and validity ------------------------------------------------------------------------------

INTS = ("int8", "int32", "uint64", "datetime64[ns]")
FLOATS = ("float32", "float64")
#: chain -> (fixed attribute dtypes, var fields: False | "int" | True (also strings))
ATTRIBUTE_CHAINS: dict[str, tuple[tuple, object]] = {
    "NOOP": (INTS + FLOATS, True),
    "DOUBLE_DELTA": (INTS, True),
    "DELTA": (INTS, True),
    "BIT_WIDTH_REDUCTION": (INTS, "int"),
    "BIT_WIDTH_REDUCTION_W64": (INTS, "int"),
    "BITSHUFFLE": (INTS + FLOATS, True),
    "POSITIVE_DELTA": (INTS, False),
    "POSITIVE_DELTA_W64": (INTS, False),
    "XOR": (INTS + FLOATS, True),
    "SCALE_FLOAT": (FLOATS, False),
    "SCALE_FLOAT_W2": (FLOATS, False),
    "SCALE_FLOAT_W8": (FLOATS, False),
    "RLE": (INTS, True),
    "BIT_WIDTH_REDUCTION+ZSTD": (INTS, "int"),
    "DELTA+BYTESHUFFLE+LZ4": (INTS, True),
    "DOUBLE_DELTA+BITSHUFFLE+ZSTD": (INTS, True),
    "SCALE_FLOAT+BYTESHUFFLE+ZSTD": (FLOATS, False),
    "SCALE_FLOAT_W2+BIT_WIDTH_REDUCTION+ZSTD": (FLOATS, False),
    "SCALE_FLOAT_W8+XOR+GZIP": (FLOATS, False),
    "CHECKSUM_SHA256+GZIP": (INTS + FLOATS, True),
    "XOR+BIT_WIDTH_REDUCTION+ZSTD": (INTS + FLOATS, True),
    "POSITIVE_DELTA+BITSHUFFLE+ZSTD": (INTS, False),
    "DOUBLE_DELTA_AS_INT64+BIT_WIDTH_REDUCTION+ZSTD": (("int64", "float64"), False),
    "DOUBLE_DELTA_AS_INT32+BIT_WIDTH_REDUCTION+ZSTD": (("float32", "int32"), False),
    "DELTA_AS_UINT16+BIT_WIDTH_REDUCTION+BZIP2": (("int32", "float64"), False),
    "DELTA_AS_INT64+BITSHUFFLE": (("int64", "float64"), False),
    "BITSHUFFLE+XOR+ZSTD": (("int8", "int16"), False),
    "XOR+BIT_WIDTH_REDUCTION_W64+CHECKSUM_MD5": (INTS, "int"),
}
#: (coords, offsets, validity) chains of the arrays whose every pipeline is filtered
PIPELINE_ARRAYS = (
    ("DELTA+BIT_WIDTH_REDUCTION+ZSTD", "DOUBLE_DELTA+BITSHUFFLE", "BITSHUFFLE+ZSTD"),
    ("POSITIVE_DELTA+BITSHUFFLE+ZSTD", "XOR+BIT_WIDTH_REDUCTION_W64+CHECKSUM_MD5", "RLE"),
    ("DOUBLE_DELTA_AS_INT64+BIT_WIDTH_REDUCTION+ZSTD", "POSITIVE_DELTA_W64+BYTESHUFFLE+CHECKSUM_MD5", "XOR+LZ4"),
)
N, CAPACITY = 300, 130


def _values(dtype: str, n: int, seed: int) -> np.ndarray:
    """Non-decreasing values in small steps (what every filter accepts, POSITIVE_DELTA too)."""
    dt = np.dtype(dtype)
    steps = np.random.default_rng(seed).integers(0, 4, n)
    if dt.kind == "f":
        return (1000 + np.cumsum(steps) * 0.37).astype(dt)
    v = np.cumsum(steps).astype(np.int64)
    if dt.itemsize == 1:
        v = v * 200 // max(1, int(v[-1]))     # within 8 bits, still non-decreasing
    v = v + (10 if dt.kind == "u" else -40 if dt.itemsize > 1 else -100)
    if dt.kind == "M":
        return (v * 1_000_003).view(dt)
    return v.astype(dt)


def _var(kind: str, n: int, seed: int) -> np.ndarray:
    cells = np.empty(n, dtype=object)
    if kind == "str":
        words = ["a", "bb", "ccc", "héllo", "wörld", "tiledb", "zz" * 7]
        cells[:] = [words[(i * 7 + seed) % len(words)] + str(i // 3) for i in range(n)]
    else:
        cells[:] = [np.arange(i % 3 + 1, dtype=np.int32) + i for i in range(n)]
    return cells


def _slug(chain: str) -> str:
    return chain.lower().replace("+", "_")


def write_filter_array(path: Path, chains: dict, *, sparse: bool = True, coords=None, offsets=None,
                       validity=None) -> Path:
    """One 1-D array (N cells; sparse: capacity CAPACITY, dense: 3 tiles) with, per chain, an
    attribute of each of its dtypes, a nullable one, and var ones."""
    attrs, data, valid = [], {}, {}
    for k, (chain, (dtypes, var)) in enumerate(chains.items()):
        flist = arrays.filter_list(chain)
        for dt in dtypes:
            name = f"{_slug(chain)}_{np.dtype(dt).name.replace('[', '_').rstrip(']')}"
            attrs.append(tiledb.Attr(name, dtype=dt, filters=flist))
            data[name] = _values(dt, N, k)
        name = f"{_slug(chain)}_null"
        attrs.append(tiledb.Attr(name, dtype=dtypes[0], nullable=True, filters=flist))
        data[name], valid[name] = _values(dtypes[0], N, k), (np.arange(N) % 5 != 2).astype(np.uint8)
        for vk in (("int", "str") if var is True else ("int",) if var else ()):
            name = f"{_slug(chain)}_var_{vk}"
            attrs.append(tiledb.Attr(name, dtype=str if vk == "str" else np.int32, var=True,
                                     nullable=vk == "int", filters=flist))
            data[name] = _var(vk, N, k)
            if vk == "int":
                valid[name] = (np.arange(N) % 4 != 1).astype(np.uint8)
    kw = {}
    if offsets:
        kw["offsets_filters"] = arrays.filter_list(offsets)
    if validity:
        kw["validity_filters"] = arrays.filter_list(validity)
    if sparse:
        dim = tiledb.Dim("d0", domain=(0, 10 ** 6), tile=1000, dtype=np.uint64)
        schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), attrs=attrs, sparse=True, capacity=CAPACITY, **kw)
        if coords:
            schema._coords_filters = arrays.filter_list(coords)
    else:
        dim = tiledb.Dim("d0", domain=(0, N - 1), tile=N // 3, dtype=np.int64)
        schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), attrs=attrs, sparse=False, **kw)
    tiledb.Array.create(str(path), schema)
    with tiledb.open(str(path), "w") as A:
        if sparse:
            sel = (np.arange(N, dtype=np.uint64) * 3,)
            from tiledb.sparse_array import _setitem_impl_sparse
            _setitem_impl_sparse(A, sel, data, valid)
        else:
            # the whole domain: a fill value in a tile would break POSITIVE_DELTA's order
            A._setitem_impl((slice(0, N),), data, valid)
    return path


def write_image(path: Path, chain: str, depth: int) -> Path:
    """Dense 2-D uint8 of 8x8-pixel tiles under WEBP (`depth` bytes per pixel)."""
    h, w = 16, 16 * depth
    dims = [tiledb.Dim("y", domain=(0, h - 1), tile=8, dtype=np.int32),
            tiledb.Dim("x", domain=(0, w - 1), tile=8 * depth, dtype=np.int32)]
    attr = tiledb.Attr("rgb", dtype=np.uint8, filters=arrays.filter_list(chain))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=tiledb.Domain(*dims), attrs=[attr], sparse=False))
    yy, xx = np.mgrid[0:h, 0:w]
    with tiledb.open(str(path), "w") as A:
        A[:, :] = ((yy * 13 + xx * 5) % 256).astype(np.uint8)
    return path


@source("filters")
def _filters(base: Path) -> list[Healthy]:
    out = [write_filter_array(base / "attributes_sparse", ATTRIBUTE_CHAINS),
           write_filter_array(base / "attributes_dense", ATTRIBUTE_CHAINS, sparse=False,
                              offsets="DOUBLE_DELTA+BITSHUFFLE", validity="BITSHUFFLE+ZSTD")]
    for k, (coords, offsets, validity) in enumerate(PIPELINE_ARRAYS):
        out.append(write_filter_array(base / f"pipelines_{k}", {"ZSTD": (("int32",), True)}, coords=coords,
                                      offsets=offsets, validity=validity))
    for chain, depth in (("WEBP_RGB_LOSSLESS", 3), ("WEBP_BGRA_LOSSLESS", 4), ("WEBP_RGB_LOSSY", 3),
                         ("WEBP_RGBA_LOSSY", 4)):
        out.append(write_image(base / chain.lower(), chain, depth))
    return [_local("filters", p) for p in out]


# -- groups ------------------------------------------------------------------------------------------

def build_absolute_inside(base: Path) -> Path:
    """A group whose members, inside its own folder, were added by absolute path and by file:// URI (as
    tiledbsoma and older writers add them), beside a relative one."""
    top = base / "absolute_inside"
    tiledb.Group.create(str(top))
    groups.small_array(top / "by_path", "dense")
    groups.small_array(top / "by_uri", "sparse")
    groups.small_array(top / "rel", "dense")
    tiledb.Group.create(str(top / "sub"))
    groups._add(top, [(str(top / "by_path"), "by_path", False), ("file://" + str(top / "by_uri"), "by_uri", False),
                      ("rel", "rel", True), (str(top / "sub"), "sub", False)])
    return top


def build_metadata_group(path: Path, vacuum: bool) -> Path:
    """A group whose metadata was written four times (a key deleted), then consolidated (and vacuumed)."""
    tiledb.Group.create(str(path))
    groups._meta(path, {"k0": 0})
    groups._meta(path, {"k1": 1, "k2": [1.5, 2.5]})
    with tiledb.Group(str(path), "w") as g:
        del g.meta["k0"]
    tiledb.Group.consolidate_metadata(str(path))
    if vacuum:
        tiledb.Group.vacuum_metadata(str(path))
    return path


@source("groups")
def _groups(base: Path) -> list[Healthy]:
    out = [groups.build_nested(base / "nested").path, build_absolute_inside(base),
           groups.build_cycle(base / "cycle").path, build_metadata_group(base / "meta_consolidated", False),
           build_metadata_group(base / "meta_vacuumed", True)]
    soma = base / "soma"
    try:
        out.append(groups.build_soma(soma).path)
    except (subprocess.CalledProcessError, OSError):
        pass   # tiledbsoma absent: the other groups still stand
    return [Healthy(f"groups/{Path(p).relative_to(base)}", str(p), kind="group") for p in out]


# -- what other writers wrote: the back-compat corpus (formats 1-22), TileDB 0.x ----------------------

#: corpus folder -> files its upstream source put into the array folder (not TileDB's: rightly a warning),
#: left out of the copy the rule reads
FOREIGN_FILES = {"v09": ("legacy_validity-README.md",)}


@source("backcompat")
def _backcompat(base: Path) -> list[Healthy]:
    """Every array of the back-compat corpus (formats 1-22) that TileDB opens; an array whose folder holds a
    file of its upstream's own (FOREIGN_FILES) is read from a copy without it."""
    out = []
    for folder, path in corpus.arrays():
        if folder in corpus.REFUSED:
            continue
        if folder in FOREIGN_FILES:
            path = str(corpus.copy_array(path, base / folder))
            for name in FOREIGN_FILES[folder]:
                os.remove(os.path.join(path, name))
        out.append(Healthy(f"backcompat/{folder}", path))
    return out


@source("marker_groups")
def _marker_groups(base: Path) -> list[Healthy]:
    """Groups as TileDB before 2.9 wrote them (tiledb_group_create: an empty __tiledb_group.tdb and nothing
    else; the members are the folders inside), holding the TileDB-VCF datasets of the corpus as a
    TileDB-VCF release of their time laid them out: its `data` array beside the group marker."""
    out = []
    for folder in ("v03", "v05", "v06"):
        group = base / f"vcf_{folder}"
        group.mkdir()
        (group / "__tiledb_group.tdb").touch()
        src = dict(corpus.arrays()).get(folder)
        if src is None:
            continue
        shutil.copytree(src, group / "data")
        out.append(Healthy(f"marker_groups/vcf_{folder}", str(group), kind="group"))
    return out


_LEGACY0X = """
import sys
sys.path.insert(0, sys.argv[1])
import legacy0x_arrays as Z
lib = Z.library()
if lib is not None:
    Z.build_corpus(lib, sys.argv[2])
    Z.sys_stdout_flush()
"""


@source("legacy0x")
def _legacy0x(base: Path) -> list[Healthy]:
    """GenomicsDB's TileDB 0.x: a workspace of arrays of every codec and layout, a consolidated array and a
    group (legacy0x_arrays.build_corpus, without the interrupted writes of its damage cases), written in a
    child process (the library may crash a process at exit, after it wrote everything)."""
    subprocess.run([sys.executable, "-c", _LEGACY0X, str(Path(__file__).parent), str(base)],
                   capture_output=True, timeout=600)
    ws = base / "ws"
    if not (ws / "__tiledb_workspace.tdb").exists():
        return []
    out = [Healthy("legacy0x/ws", str(ws), kind="workspace")]
    for root, dirs, files in os.walk(ws):
        if "__array_schema.tdb" in files:
            out.append(Healthy(f"legacy0x/{Path(root).relative_to(ws)}", root))
            dirs[:] = []
    return sorted(out, key=lambda h: h.name)


#: local healthy objects (by name) that the remote tests also upload to each object-store emulator
REMOTE = ("kinds/consolidated_sparse_vacuumed", "history/sparse_full_everything", "groups/soma")
