"""The legacy `__coords.tdb` of formats 1-4: every dimension's coordinates in one tile."""

from __future__ import annotations

from ...lazy import np
from ..errors import FormatError
from ..errors import safety_net
from ..filter_registry import filter_type


def coords_zipped(version: int, coords_filters) -> bool:
    """Whether a legacy `__coords.tdb` tile is zipped (x1,y1,x2,y2,...) rather than split per dimension.

    Format 1 split the coordinates only when the coords pipeline had a
    compressor; from format 2 they are always split (§5.2).
    """
    if version >= 2:
        return False
    return not any(_format1_compressor(f.id) for f in coords_filters.filters)


def _format1_compressor(fid: int) -> bool:
    entry = filter_type(fid)
    return entry is not None and entry.format1_compressor


@safety_net("coordinates tile")
def split_coords(data, dims, zipped: bool, file: str = "__coords.tdb", structure: str = "coordinates tile",
                 offset: int = 0) -> tuple[np.ndarray, ...]:
    """One decoded `__coords` tile cut into per-dimension coordinate arrays (dimensions share one type).

    Zipped: D values per cell, cell after cell. Unzipped: all of dimension 0,
    then all of dimension 1, ...
    """
    dims = tuple(dims)
    if not dims:
        raise FormatError(file, structure, offset, "the schema has no dimensions")
    dt = dims[0].datatype
    if any(d.datatype.id != dt.id for d in dims):
        raise FormatError(file, structure, offset, "legacy coordinates need one datatype for every dimension")
    D = len(dims)
    cell = D * dt.size
    if len(data) % cell:
        raise FormatError(file, structure, offset,
                          f"{len(data)} bytes is not a whole number of {D}-dimensional {cell}-byte coordinates")
    values = np.frombuffer(bytes(data), dt.dtype)
    n = len(values) // D
    table = values.reshape(n, D).T if zipped else values.reshape(D, n)
    return tuple(np.ascontiguousarray(table[j]) for j in range(D))
