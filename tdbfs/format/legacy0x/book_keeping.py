"""`__book_keeping.tdb.gz` of a 0.x fragment (docs/format-0x.md, "__book_keeping.tdb.gz").

The file is one gzip stream; inside, all little-endian:
non-empty domain, MBRs, bounding coordinates, tile offsets (attributes then coordinates),
var tile offsets, var tile sizes (attributes only), last tile cell number.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ...lazy import np
from ..cursor import Cursor
from ..errors import FormatError
from ..errors import safety_net
from .schema import Legacy0xSchema

STRUCTURE = "book-keeping"
# A book-keeping file holds a few u64 per tile: far below this even for huge fragments.
MAX_DECOMPRESSED = 1 << 30


@dataclass(frozen=True)
class BookKeeping:
    file: str
    gzip_size: int
    size: int                      # decompressed bytes
    non_empty_domain: tuple        # ((lo, hi), ...) per dimension
    mbrs: np.ndarray               # (mbr_num, dim, 2)
    bounding_coords: np.ndarray    # (bc_num, 2, dim): first and last cell of each tile
    tile_offsets: tuple            # attr_num + 1 arrays (coordinates last)
    tile_var_offsets: tuple        # attr_num arrays
    tile_var_sizes: tuple          # attr_num arrays
    last_tile_cell_num: int


def gunzip(data: bytes, file: str) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, MAX_DECOMPRESSED)
    except zlib.error as exc:
        raise FormatError(file, "gzip stream", 0, f"does not decompress: {exc}") from None
    if d.unconsumed_tail:
        raise FormatError(file, "gzip stream", 0, f"decompresses to more than {MAX_DECOMPRESSED} bytes")
    if not d.eof:
        raise FormatError(file, "gzip stream", len(data), "the gzip stream is truncated")
    return out


@safety_net("book-keeping")
def parse_book_keeping(gz: bytes, file: str, schema: Legacy0xSchema) -> BookKeeping:
    data = gunzip(gz, file)
    # offsets are positions in the decompressed stream
    c = Cursor(data, file, STRUCTURE, within="decompressed stream")
    dt = schema.coord_type.dtype
    dim = schema.dim_num
    n_attr = len(schema.attributes)
    at = c.pos
    ned_bytes = c.i64("non-empty domain size")
    if ned_bytes != 2 * dim * dt.itemsize:
        raise c.error(f"non-empty domain is {ned_bytes} bytes, {dim} dimensions of {schema.coord_type.name} "
                      f"need {2 * dim * dt.itemsize}", at)
    ned = c.array(2 * dim, dt, "non-empty domain").reshape(dim, 2)
    mbr_num = _count(c, "MBR count", 2 * dim * dt.itemsize)
    mbrs = c.array(mbr_num * 2 * dim, dt, "MBRs").reshape(mbr_num, dim, 2)
    bc_num = _count(c, "bounding coordinates count", 2 * dim * dt.itemsize)
    bcs = c.array(bc_num * 2 * dim, dt, "bounding coordinates").reshape(bc_num, 2, dim)
    tile_offsets = tuple(_u64_list(c, f"tile offsets of {_field(schema, i)}") for i in range(n_attr + 1))
    var_offsets = tuple(_u64_list(c, f"var tile offsets of {_field(schema, i)}") for i in range(n_attr))
    var_sizes = tuple(_u64_list(c, f"var tile sizes of {_field(schema, i)}") for i in range(n_attr))
    at = c.pos
    last = c.i64("last tile cell number")
    if last < 0:
        raise c.error(f"last tile cell number {last} is negative", at)
    if not c.at_end():
        raise c.error(f"{c.remaining} bytes after the last book-keeping field")
    return BookKeeping(file, len(gz), len(data), tuple(tuple(r) for r in ned.tolist()), mbrs, bcs,
                       tile_offsets, var_offsets, var_sizes, last)


def _field(schema: Legacy0xSchema, i: int) -> str:
    return schema.attributes[i].name if i < len(schema.attributes) else "__coords"


def _count(c: Cursor, what: str, item_size: int) -> int:
    at = c.pos
    n = c.i64(what)
    if n < 0:
        raise c.error(f"{what} {n} is negative", at)
    if item_size and n > c.remaining // item_size:
        raise c.error(f"{what} {n} of {item_size}-byte items exceeds the {c.remaining} bytes that remain", at)
    return n


def _u64_list(c: Cursor, what: str) -> np.ndarray:
    n = _count(c, f"{what} count", 8)
    return c.array(n, "<u8", what)
