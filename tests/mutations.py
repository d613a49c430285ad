"""Damage to real arrays, one mutation at a time, and the walk that reads every view.

A Mutation names what it damages (file relative to the array root, byte offset,
a window of offsets a problem may point at), the view paths allowed to change
(`affected`, prefixes), and one view that must read as EIO (`broken`). It is
applied to a copy of an array written by tiledb-py; the offsets come from the
undamaged array's own structures (footer, generic tile offsets, tile offsets),
so every mutation hits the structure it is named for.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from tdbfs.format.tile import CHUNK_HEADER_SIZE
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import DirNode, FileNode, SymlinkNode, ViewError
from tdbfs.views.tree import build_root

EIO = "EIO"
# Views that summarise the whole array or one fragment, and grow as problems are found.
SUMMARIES = ("array.yaml", "stats.csv", "fragments.svg", "timeline.csv",)
#: folders that summarise the array over time: any commit, schema or metadata file changes them
SUMMARY_FOLDERS = ("as_of/",)


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[str], None]        # damages the array at this path
    file: str                           # damaged file, relative to the array root
    near: tuple[int, int] | None        # a problem must point at an offset in [lo, hi] of `file`
    affected: tuple[str, ...]           # view path prefixes that may change
    broken: str | None                  # a view path that must read as EIO
    check_file: str | None = None       # what `tdbfs check` must name (default: file)
    fragment: str = ""                  # the damaged fragment's view folder, when one
    tags: tuple[str, ...] = field(default=())


# -- bytes ----------------------------------------------------------------------------------

def truncate(rel: str, at: int) -> Callable[[str], None]:
    def run(root):
        with open(os.path.join(root, rel), "r+b") as f:
            f.truncate(at)
    return run


def overwrite(rel: str, at: int, data: bytes) -> Callable[[str], None]:
    def run(root):
        with open(os.path.join(root, rel), "r+b") as f:
            f.seek(at)
            f.write(data)
    return run


def flip_bit(rel: str, at: int, bit: int = 6) -> Callable[[str], None]:
    def run(root):
        with open(os.path.join(root, rel), "r+b") as f:
            f.seek(at)
            b = f.read(1)[0]
            f.seek(at)
            f.write(bytes([b ^ (1 << bit)]))
    return run


def replace_file(rel: str, data: bytes) -> Callable[[str], None]:
    def run(root):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return run


def delete(rel: str) -> Callable[[str], None]:
    return lambda root: os.remove(os.path.join(root, rel))


def swap(rel: str, a: tuple[int, int], b: tuple[int, int]) -> Callable[[str], None]:
    """Exchange the byte ranges a=(start, end) and b (a before b, adjacent or not)."""
    def run(root):
        path = os.path.join(root, rel)
        with open(path, "rb") as f:
            data = f.read()
        out = data[:a[0]] + data[b[0]:b[1]] + data[a[1]:b[0]] + data[a[0]:a[1]] + data[b[1]:]
        with open(path, "wb") as f:
            f.write(out)
    return run


def garbage(n: int, seed: int = 7) -> bytes:
    import numpy as np
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


# -- walking the view -----------------------------------------------------------------------

class Timeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """SIGALRM-based: a hang in decoding (an endless loop) fails the mutation instead of the suite."""
    def fire(signum, frame):
        raise Timeout(f"still reading after {seconds} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def walk(root_path: str, cache_bytes: int = 64 << 20) -> tuple[dict, ArrayStore]:
    """Every file of the view: path -> bytes, or EIO when it reads as ViewError.

    Any other exception escapes: that is a crash of the view, which the suite fails on.
    """
    store = ArrayStore(root_path, cache_bytes=cache_bytes)
    root = build_root(store)
    out: dict = {}
    todo = [("", root)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, SymlinkNode):
            out[path] = ("->", node.target)
            continue
        if isinstance(node, DirNode):
            try:
                children = node.children()
            except ViewError:
                out[path + "/"] = EIO
                continue
            todo.extend((f"{path}/{n}".lstrip("/"), c) for n, c in sorted(children.items()))
            continue
        assert isinstance(node, FileNode), (path, node)
        try:
            out[path] = node.read(0, node.size())
        except ViewError:
            out[path] = EIO
    return out, store


def copy_array(src: str, dst: str) -> str:
    shutil.copytree(src, dst)
    return dst


# -- the mutations of one array ----------------------------------------------------------------

NAMES = ("truncate_metadata_at_footer", "truncate_metadata_at_rtree", "truncate_metadata_at_tile_offsets_0",
         "truncate_metadata_at_tile_var_sizes_1", "truncate_metadata_at_last_byte", "flip_gtile_tile_size",
         "huge_gtile_persisted_size", "huge_gtile_chunk_count", "huge_rtree_chunk_length", "huge_footer_len",
         "flip_chunk_unfiltered_length", "huge_chunk_filtered_length", "huge_chunk_unfiltered_length",
         "huge_tile_chunk_count", "garbage_compressed_bytes", "truncate_data_at_tile_2", "swap_tiles_0_1",
         "delete_var_file", "delete_commit", "extra_file_in_fragment", "garbage_schema", "garbage_metadata_file",
         "garbage_delete_commit", "overwritten_fragment_metadata")


def fragment_mutations(array: str) -> list[Mutation]:
    """Mutations of the first fragment of `array` (a sparse array of tests/arrays.py "sparse" kind:
    a0 int32 ZSTD, a1 var string, a2 nullable float64, several tiles) and of its array-level files."""
    store = ArrayStore(array)
    frags = store.fragments()
    frag = frags[0]
    fname = frag.name
    fview = f"fragments/{fname}"
    md = f"{frag.rel}/__fragment_metadata.tdb"
    md_size = store.file_size(md)
    footer = frag.footer()
    g = footer.generic_tile_offsets
    a0 = frag.field_by_stem("a0")
    a1 = frag.field_by_stem("a1")
    a0_file = f"{frag.rel}/a0.tdb"
    a0_offsets = [int(o) for o in frag.tile_offsets(a0.idx)]
    a0_size = store.file_size(a0_file)
    a0_tiles = len(a0_offsets)
    assert a0_tiles >= 3, "the mutation array needs several tiles"
    every_metadata_view = (fview + "/",)
    t = frag.parsed_name.t2 + 1
    out: list[Mutation] = []

    # Truncations of __fragment_metadata.tdb at every structure boundary (the footer and sampled generic
    # tiles): the footer (at the end of the file) is gone, so the whole fragment reads as EIO, and the
    # other fragment stays identical.
    boundaries = [("footer", footer.offset), ("rtree", g.rtree), ("tile_offsets_0", g.tile_offsets[0]),
                  ("tile_var_sizes_1", g.tile_var_sizes[a1.idx]), ("last_byte", md_size - 1)]
    for label, at in boundaries:
        out.append(Mutation(f"truncate_metadata_at_{label}", truncate(md, at), md, (max(0, at - 64), md_size),
                            every_metadata_view, f"{fview}/footer.yaml", fragment=fview, tags=("metadata",)))

    # A generic tile header of the metadata (tile_offsets of a0): a bit of its tile_size, and persisted_size
    # set to a huge value. The footer still reads; a0's tiles (located through that list) do not.
    at = g.tile_offsets[a0.idx]
    a0_views = (f"{fview}/attrs/a0/", f"{fview}/tiles.csv", f"{fview}/fragment.yaml")
    out.append(Mutation("flip_gtile_tile_size", flip_bit(md, at + 12, 3), md, (at, at + 34),
                        a0_views, f"{fview}/attrs/a0/tile_0.bin", fragment=fview))
    out.append(Mutation("huge_gtile_persisted_size", overwrite(md, at + 4, struct.pack("<Q", 2**64 - 1)), md,
                        (at, at + 34), a0_views, f"{fview}/attrs/a0/tile_0.bin", fragment=fview))
    out.append(Mutation("huge_gtile_chunk_count", overwrite(md, at + 34, struct.pack("<Q", 2**64 - 1)), md,
                        (at + 34, at + 34 + 8), a0_views, f"{fview}/attrs/a0/tile_1.bin", fragment=fview))
    # The R-tree's generic tile: the footer, tiles and the other fragments stay readable.
    rt = g.rtree
    out.append(Mutation("huge_rtree_chunk_length", overwrite(md, rt + 34 + 8 + 4, struct.pack("<I", 0xFFFFFFFF)),
                        md, (rt + 34, rt + 34 + 8 + 12), (f"{fview}/rtree/", f"{fview}/fragment.yaml"),
                        f"{fview}/rtree/", fragment=fview))
    # footer_len (the file's last 8 bytes) set to a huge value.
    out.append(Mutation("huge_footer_len", overwrite(md, md_size - 8, struct.pack("<Q", 2**63)), md,
                        (md_size - 8, md_size), every_metadata_view, f"{fview}/footer.yaml", fragment=fview))

    # Data tiles of a0 (ZSTD): tile 1's chunk header fields. Only tile 1 breaks.
    k = 1
    t1 = a0_offsets[k]
    chunk = t1 + 8          # first chunk header: after the u64 chunk count (§2.2)
    tile_views = (f"{fview}/attrs/a0/tile_{k}.", f"{fview}/fragment.yaml", f"{fview}/raw/a0.tdb")
    out.append(Mutation("flip_chunk_unfiltered_length", flip_bit(a0_file, chunk + 1), a0_file, (chunk, chunk + 12),
                        tile_views, f"{fview}/attrs/a0/tile_{k}.bin", fragment=fview))
    out.append(Mutation("huge_chunk_filtered_length", overwrite(a0_file, chunk + 4, struct.pack("<I", 0xFFFFFFFF)),
                        a0_file, (chunk, chunk + 12), tile_views, f"{fview}/attrs/a0/tile_{k}.bin", fragment=fview))
    out.append(Mutation("huge_chunk_unfiltered_length",
                        overwrite(a0_file, chunk, struct.pack("<I", 0xFFFFFFFF)),
                        a0_file, (chunk, chunk + 12), tile_views, f"{fview}/attrs/a0/tile_{k}.bin", fragment=fview))
    out.append(Mutation("huge_tile_chunk_count", overwrite(a0_file, t1, struct.pack("<Q", 2**64 - 1)),
                        a0_file, (t1, t1 + 8), tile_views, f"{fview}/attrs/a0/tile_{k}.bin", fragment=fview))
    # Compressed bytes of tile 1 replaced by garbage (the chunk headers stay).
    data_at = chunk + CHUNK_HEADER_SIZE
    out.append(Mutation("garbage_compressed_bytes", overwrite(a0_file, data_at, garbage(8)), a0_file,
                        (t1, a0_offsets[k + 1]), tile_views, f"{fview}/attrs/a0/tile_{k}.bin", fragment=fview))
    # Truncation of a0.tdb at the start of tile 2: tiles 0 and 1 stay identical.
    cut = a0_offsets[2]
    out.append(Mutation("truncate_data_at_tile_2", truncate(a0_file, cut), a0_file, (cut, a0_size),
                        tuple(f"{fview}/attrs/a0/tile_{j}." for j in range(2, a0_tiles))
                        + (f"{fview}/fragment.yaml", f"{fview}/raw/a0.tdb", f"{fview}/attrs/a0/info.yaml",
                           f"{fview}/stats.csv"),
                        f"{fview}/attrs/a0/tile_2.bin", fragment=fview))
    # Tiles 0 and 1 swapped in place. Each still decodes (same sizes), so no view can fail; `tdbfs check`
    # finds them through the tile mins/maxes of the fragment metadata.
    out.append(Mutation("swap_tiles_0_1", swap(a0_file, (a0_offsets[0], a0_offsets[1]), (a0_offsets[1], a0_offsets[2])),
                        a0_file, (a0_offsets[0], a0_offsets[2]),
                        (f"{fview}/attrs/a0/tile_0.", f"{fview}/attrs/a0/tile_1.", f"{fview}/fragment.yaml",
                         f"{fview}/raw/a0.tdb"), None, fragment=fview))
    # Deleted and extra files.
    a1_var = f"{frag.rel}/a1_var.tdb"
    out.append(Mutation("delete_var_file", delete(a1_var), a1_var, None,
                        (f"{fview}/attrs/a1/", f"{fview}/fragment.yaml", f"{fview}/raw/", f"{fview}/stats.csv"),
                        f"{fview}/attrs/a1/tile_0.var.bin", fragment=fview))
    commits = [c for c in store.commit_files() if c.endswith(fname + ".wrt")]
    out.append(Mutation("delete_commit", delete(commits[0]), commits[0], None,
                        (f"commits/{os.path.basename(commits[0])}.yaml", f"{fview}/fragment.yaml"), None,
                        check_file=frag.rel, fragment=fview))
    out.append(Mutation("extra_file_in_fragment", replace_file(f"{frag.rel}/zz_extra.tdb", garbage(100)),
                        f"{frag.rel}/zz_extra.tdb", None, (f"{fview}/raw/", f"{fview}/fragment.yaml"), None,
                        fragment=fview, tags=("warning",)))
    # Garbage array-level files.
    schema = store.latest_schema_file()
    out.append(Mutation("garbage_schema", replace_file(schema, garbage(store.file_size(schema))), schema, (0, 64),
                        ("",), f"schema/{os.path.basename(schema)}.yaml", tags=("schema",)))
    # A metadata file and a delete commit of garbage, named as TileDB names them (§6.1).
    meta = f"__meta/__{t}_{t}_{'a' * 32}_22"
    out.append(Mutation("garbage_metadata_file", replace_file(meta, garbage(200)), meta, (0, 64),
                        ("metadata/",), f"metadata/{os.path.basename(meta)}.yaml"))
    dele = f"__commits/__{t}_{t}_{'b' * 32}_22.del"
    out.append(Mutation("garbage_delete_commit", replace_file(dele, garbage(120)), dele, (0, 64),
                        ("commits/",), f"commits/{os.path.basename(dele)}.yaml"))
    # The case: one fragment's __fragment_metadata.tdb overwritten with other bytes.
    out.append(Mutation("overwritten_fragment_metadata", replace_file(md, garbage(md_size, seed=11)), md,
                        (0, md_size), every_metadata_view, f"{fview}/footer.yaml", fragment=fview,
                        tags=("metadata", "tiledb_refuses")))
    return out
