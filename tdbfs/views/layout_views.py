"""Byte maps of a fragment's files as CSV (layout.csv, layout/<file>.csv) and hex dumps of the
generic tiles and footer of its __fragment_metadata.tdb (hex/<name>.txt)."""

from __future__ import annotations

import bisect
import re

from ..store import byte_map
from ..store.fragment import Fragment
from .common import CachedFile, guarded
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
    return {f"{name}.csv": CachedFile(frag.store.cache, ("layout", frag.rel, name),
                                      guarded(lambda name=name: layout_file_csv(frag, name), frag.problems,
                                              frag._file(name), "byte map"), mtime=t)
            for name in byte_map.fragment_file_names(frag)}


def hex_name(region: str) -> str:
    """File name of a region's dump: tile_offsets[3] -> tile_offsets_3 (no glob characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", region).strip("_") or "region"


def hex_children(frag: Fragment) -> dict:
    name = byte_map.METADATA_FILE
    t = frag.mtime()
    out = {}
    for region in byte_map.metadata_regions(frag):  # from headers alone: listing hex/ decodes nothing
        out[f"{hex_name(region.name)}.txt"] = CachedFile(
            frag.store.cache, ("hex", frag.rel, region.name, region.start),
            guarded(lambda region=region: hex_text(frag, name, region), frag.problems, frag._file(name),
                    f"hex view of {region.name}"), mtime=t)
    return out


def hex_text(frag: Fragment, name: str, region) -> bytes:
    """`hexdump -C` lines of the region (offsets in the file), each preceded by `# @offset` lines
    naming the ranges of the byte map that start within it."""
    m = byte_map.file_map(frag, name)
    data = frag.store.read_file(frag._file(name))
    start, end = region.start, min(region.end, len(data))
    first = max(bisect.bisect_right([r.start for r in m.ranges], start) - 1, 0)
    inside = []
    for r in m.ranges[first:]:
        if r.start >= end:
            break
        if r.end > start:
            inside.append(r)
    out = [f"# {name}: {region.name}, bytes {start}-{end} ({end - start} bytes)",
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


def hexdump_line(offset: int, chunk: bytes) -> str:
    cells = [f"{b:02x}" for b in chunk]
    left, right = " ".join(cells[:8]), " ".join(cells[8:])
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
    return f"{offset:08x}  {left:<23}  {right:<23}  |{text}|"
