"""Byte maps of a fragment's files as CSV (layout.csv, layout/<file>.csv) and hex dumps of the
generic tiles and footer of its __fragment_metadata.tdb (hex/<name>.txt); the same for the
array-level files (schemas, enumerations, commits, metadata, .meta files): `array_file_dirs`."""

from __future__ import annotations

import bisect
import posixpath
import re
from typing import Callable

from ..store import array_file_map, byte_map
from ..store.fragment import Fragment
from .common import KeyedDir, guarded
from .nodes import BytesFile, DirNode, FileNode, InCache
from .render import to_csv

COLUMNS = ["start", "end", "length", "structure", "detail"]


def layout_file_csv(frag: Fragment, name: str) -> bytes:
    m = byte_map.file_map(frag, name)
    return to_csv(COLUMNS, ([r.start, r.end, r.length, r.structure, r.detail] for r in m.ranges))


def layout_csv(frag: Fragment) -> bytes:
    """Every file's map in one table, file column first (file order as listed in raw/)."""
    rows = []
    for name in byte_map.fragment_file_names(frag):
        m = byte_map.file_map(frag, name)
        rows.extend([name, r.start, r.end, r.length, r.structure, r.detail] for r in m.ranges)
    return to_csv(["file"] + COLUMNS, rows)


def layout_children(frag: Fragment) -> dict:
    t = frag.mtime()
    token = frag.cache_token()  # a fragment still being written is mapped again when its files change
    return {f"{name}.csv": BytesFile(guarded(lambda name=name: layout_file_csv(frag, name), frag.problems,
                                             frag._file(name), "byte map"),
                                     InCache(frag.store.cache, ("layout", frag.store.path, frag.rel, token, name), immutable=token == 0),
                                     mtime=t)
            for name in byte_map.fragment_file_names(frag)}


def hex_name(region: str) -> str:
    """File name of a region's dump: tile_offsets[3] -> tile_offsets_3 (no glob characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", region).strip("_") or "region"


def hex_children(frag: Fragment) -> dict:
    name = byte_map.METADATA_FILE
    t = frag.mtime()
    token = frag.cache_token()
    out = {}
    for region in byte_map.metadata_regions(frag):  # from headers alone: listing hex/ decodes nothing
        out[f"{hex_name(region.name)}.txt"] = BytesFile(
            guarded(lambda region=region: hex_text(frag, name, region), frag.problems, frag._file(name),
                    f"hex view of {region.name}"),
            InCache(frag.store.cache, ("hex", frag.store.path, frag.rel, token, region.name, region.start), immutable=token == 0),
            mtime=t)
    return out


def hex_text(frag: Fragment, name: str, region) -> bytes:
    """`hexdump -C` lines of the region (offsets in the file), each preceded by `# @offset` lines
    naming the ranges of the byte map that start within it."""
    m = byte_map.file_map(frag, name)
    return hex_dump(frag.store.read_file(frag._file(name)), m.ranges, name, region.name, region.start, region.end)


def hex_dump(data, ranges, name: str, what: str, start: int, end: int) -> bytes:
    """`hexdump -C` of bytes [start, end) of the file `name`, each line preceded by `# @start-end
    structure: detail` lines for the byte-map ranges that start within it."""
    end = min(end, len(data))
    first = max(bisect.bisect_right([r.start for r in ranges], start) - 1, 0)
    inside = []
    for r in ranges[first:]:
        if r.start >= end:
            break
        if r.end > start:
            inside.append(r)
    out = [f"# {name}: {what}, bytes {start}-{end} ({end - start} bytes)",
           "# lines starting with '#' name the byte map ranges (layout/" + name + ".csv) starting in the next line",
           "#"]
    k = 0
    for line in range(start, end, 16):
        stop = min(line + 16, end)
        while k < len(inside) and inside[k].start < stop:
            r = inside[k]
            out.append(f"# @{max(r.start, start)}-{r.end} {r.structure}: {r.detail}")
            k += 1
        out.append(hexdump_line(line, data[line:stop]))
    out.append(f"{end:08x}")
    return ("\n".join(out) + "\n").encode()


# -- array-level files ---------------------------------------------------------------------------

def array_file_dirs(store, files: Callable[[], list[str]]) -> dict[str, DirNode]:
    """`layout/` (a byte map per file) and `hex/` (a dump per generic-tile file) of the array-level
    files that `files()` lists (paths relative to the array root), for one folder of the tree.

    Listing reads no file: names come from `files()`, whether a file is a generic tile from its
    name; a byte map is built when its CSV or dump is first read (or stat'ed, for the size).
    """
    def folder(suffix: str, wanted, make) -> KeyedDir:
        listed: dict[str, str] = {}   # shown name -> relative path, as of the last listing

        def names() -> list[str]:
            now: dict[str, str] = {}
            for rel in files():
                if wanted(rel):
                    now.setdefault(posixpath.basename(rel) + suffix, rel)  # one name in two folders: the first
            listed.clear()
            listed.update(now)
            return list(now)

        # KeyedDir lists before it makes a node, so every name asked for is in `listed`
        return KeyedDir(names, lambda name: make(listed[name]), mode=FileNode.mode)

    def layout_node(rel: str):
        return array_file_view(store, rel, "array layout",
                               guarded(lambda: array_layout_csv(store, rel), store.problems, rel, "byte map"))

    def hex_node(rel: str):
        return array_file_view(store, rel, "array hex",
                               guarded(lambda: array_hex_text(store, rel), store.problems, rel, "hex view"))

    is_tile = lambda rel: array_file_map.array_file_kind(rel) == array_file_map.GENERIC
    return {"layout": folder(".csv", lambda rel: True, layout_node), "hex": folder(".txt", is_tile, hex_node)}


def array_layout_csv(store, rel: str) -> bytes:
    m = array_file_map.array_file_map(store, rel)
    return to_csv(["file"] + COLUMNS, ([rel, r.start, r.end, r.length, r.structure, r.detail] for r in m.ranges))


def array_hex_text(store, rel: str) -> bytes:
    m = array_file_map.array_file_map(store, rel)
    try:
        data = store.read_file(rel)
    except OSError:   # the map says why in its one row; the dump shows that row and no byte
        data = b""
    what = m.regions[0].name if m.regions else array_file_map.array_tile_name(rel)
    return hex_dump(data, m.ranges, posixpath.basename(rel), what, 0, len(data))


def array_file_view(store, rel: str, kind: str, render) -> BytesFile:
    """A view of one array-level file, kept in the store's cache under the file's size and mtime.

    Unlike a fragment's files, these come and go while mounted (commits, vacuum) and a damaged
    one may be rewritten in place: a view of an older version must not outlive it."""
    def key():
        try:
            st = store.stat(rel)
            version = (st.size, st.mtime_ns)
        except OSError:
            version = None
        return (kind, store.path, rel, version)

    return BytesFile(render, InCache(store.cache, key, immutable=False), mtime=lambda: store.mtime(rel))


def hexdump_line(offset: int, chunk: bytes) -> str:
    cells = [f"{b:02x}" for b in chunk]
    left, right = " ".join(cells[:8]), " ".join(cells[8:])
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
    return f"{offset:08x}  {left:<23}  {right:<23}  |{text}|"
