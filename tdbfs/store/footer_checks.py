"""The footer's numbers against the files they describe (docs/format.md §5.4): a count checked against what
the data files can hold before it drives a loop, and a file size that disagrees with its file reported at
the footer field when that field is the wrong number."""

from __future__ import annotations

from ..format.errors import FormatError
from .fragment_interface import DATA, VALIDITY, VAR
from .problems import Problem

#: the least a tile takes in a data file: its u64 chunk count (docs/format.md §2.2)
MIN_TILE_BYTES = 8


def sparse_tile_count(frag) -> int:
    """The footer's sparse_tile_num, once checked against what the data files can hold: every tile of a
    stored field takes at least its u64 chunk count (docs/format.md §2.2), and the count drives loops
    over the tiles. The capacity bounds the last tile's cells."""
    footer = frag.footer()
    n, last = footer.sparse_tile_num, footer.last_tile_cell_num
    md = frag._file(frag.METADATA_FILE)
    at = footer.field_offset("sparse_tile_num")
    sizes = [size for name, size in frag.files() if name != frag.METADATA_FILE]
    room = max(sizes, default=0) // MIN_TILE_BYTES
    if sizes and n > room:
        raise FormatError(md, "fragment metadata footer", footer.offset if at is None else at,
                          f"sparse_tile_num {n} is more tiles than the data files hold: each takes at least "
                          f"{MIN_TILE_BYTES} bytes, and the largest of them has {max(sizes)} bytes")
    capacity = frag.schema().capacity
    if n and capacity and last > capacity:
        at = footer.field_offset("last_tile_cell_num")
        raise FormatError(md, "fragment metadata footer", footer.offset if at is None else at,
                          f"last_tile_cell_num {last} is more cells than a tile of capacity {capacity} holds")
    return n


def footer_size_check(frag, field, k: int, stream: str) -> None:
    """The last tile's size comes from the footer's size of its file: when that number is the wrong one
    (footer_size_finding), raise the finding that points at it."""
    footer = frag.footer()
    sizes = {DATA: footer.file_sizes, VAR: footer.file_var_sizes, VALIDITY: footer.file_validity_sizes}[stream]
    actual = dict(frag.files()).get(_file_name(field, stream))
    if actual is None or sizes is None or k + 1 != frag.tile_count(field.idx):
        return
    wrong = footer_size_finding(frag, field, stream, int(sizes[field.idx]), actual)
    if wrong is not None:
        raise FormatError(wrong.file, wrong.structure, wrong.offset, wrong.message)


#: the footer's list of sizes of each kind of data file, and the list of where its tiles start
_SIZE_LISTS = {DATA: ("file_sizes", "tile_offsets"), VAR: ("file_var_sizes", "tile_var_offsets"),
               VALIDITY: ("file_validity_sizes", "tile_validity_offsets")}
#: the most of a data file's last tile read to see where it ends
_LAST_TILE_READ = 64 << 20


def footer_size_finding(frag, field, stream: str, declared: int, size: int) -> Problem | None:
    """The finding at the footer's size field when that field is the wrong number: the data file's last
    tile (where the tile offsets put it, as long as its chunks say, docs/format.md §2.2) ends where the file
    ends. None when the file's own bytes do not say so (a truncated or extended file is the file's
    finding)."""
    from ..format.tile import parse_chunk_headers, tile_end
    sizes, starts = _SIZE_LISTS[stream]
    footer = frag.footer()
    at = footer.field_offset(sizes, field.idx)
    if at is None:
        return None
    name = _file_name(field, stream)
    rel = f"{frag.rel}/{name}"
    try:
        offsets = frag.tile_list(starts, field.idx)
        last = int(offsets[-1]) if len(offsets) else None
        if last is None or not 0 <= last < size or size - last > _LAST_TILE_READ:
            return None
        data = frag.store.pread(rel, last, size - last)
        if tile_end(parse_chunk_headers(data, rel, last, base=last), last) != size:
            return None
    except Exception:  # noqa: BLE001 -- what does not decode says nothing of the footer's number
        return None
    return Problem(f"{frag.rel}/{frag.METADATA_FILE}", "fragment metadata footer", at,
                   f"{sizes}[{field.idx}] says {name} has {declared} bytes, but it has {size}, where its last "
                   "tile ends")


def _file_name(field, stream: str) -> str:
    return {DATA: field.file, VAR: field.var_file, VALIDITY: field.validity_file}[stream]
