"""What every reverser shares: the stage it runs in, its error, and header readers."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..datatypes import Datatype


class StageError(Exception):
    """Raised inside a reverser; turned into a FormatError with file and offset by reverse_chunk."""

    def __init__(self, message: str, md_pos: int | None = None):
        super().__init__(message)
        self.md_pos = md_pos


@dataclass(frozen=True)
class Stage:
    """What one filter of the pipeline saw when TileDB ran it."""

    datatype: Datatype   # the type entering this filter (output type of the filter before it)
    limit: int           # no part may decode to more bytes than this (bounds hostile lengths)
    ctx: object          # the tile's FilterContext: cell size, format version, var-string flag, key


def read_u32s(md: memoryview, pos: int, n: int, what: str) -> tuple[tuple[int, ...], int]:
    if n < 0 or pos + 4 * n > len(md):
        raise StageError(f"{what}: {n} u32 fields need {4 * n} bytes, {len(md) - pos} remain", pos)
    return struct.unpack_from(f"<{n}I", md, pos), pos + 4 * n


def part_list(md: memoryview, what: str) -> tuple[tuple[int, ...], int]:
    """`u32 nparts, nparts x u32 part_len` at the front of md: the header of shuffles, XOR, SCALE_FLOAT, WEBP."""
    (nparts,), pos = read_u32s(md, 0, 1, f"{what} part count")
    if nparts > len(md):
        raise StageError(f"{what} claims {nparts} parts, more than its metadata holds", 0)
    return read_u32s(md, pos, nparts, f"{what} part lengths")


def check_parts_cover(lens, data: memoryview, what: str) -> None:
    if sum(lens) != len(data):
        raise StageError(f"{what} parts total {sum(lens)} bytes but the data holds {len(data)}", 0)
