"""What every fragment gives the views and `tdbfs check`, whichever layout wrote it: TileDB has one
FragmentMetadata for all its formats, and tdbfs has one fragment interface for formats 1-22
(store/fragment.py) and for TileDB 0.x (store/legacy0x_fragment.py).

Both kinds are FragmentFolder objects (files, commit state, cache token, problems) with the methods
of `FragmentLike` below; their fields have the attributes of `FieldLike`. The views and the check are
written once against these, and read only `layout` to pick what is truly one layout's own (the
footer and byte maps of 2.x, the book-keeping of 0.x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..lazy import np

# The streams of one field: fixed data (or the offsets of a var-sized field), var data, validity.
DATA, VAR, VALIDITY = "data", "var", "validity"
STREAM_SUFFIX = {DATA: ".tdb", VAR: "_var.tdb", VALIDITY: "_validity.tdb"}

#: the values of FragmentLike.layout
TILEDB, LEGACY0X = "tiledb", "legacy0x"


@dataclass(frozen=True)
class TileLocation:
    file: str               # path relative to the array root
    offset: int             # byte offset of the tile in the file
    persisted_size: int
    unfiltered_size: int
    listed: bool = True     # False: the metadata lists no offset for it (0.x uncompressed), so it sits at a
                            # position computed from the cell counts


def streams(field) -> list[str]:
    """The streams a field stores, in the order of its files."""
    return [DATA] + ([VAR] if field.var_sized else []) + ([VALIDITY] if field.nullable else [])


class FieldLike(Protocol):
    name: str              # the attribute's or dimension's name, or __coords
    stem: str              # the name of its folder under attrs/ or dims/ (and of its data files, for 2.x)
    kind: str              # format.fragment_metadata ATTRIBUTE, DIMENSION, COORDS (all dimensions at once), ...
    idx: int               # its index in the per-field lists of the metadata
    datatype: object       # format.datatypes.Datatype
    cell_val_num: int
    var_sized: bool
    nullable: bool


class DecodedTileLike(Protocol):
    data: bytes            # the stream as TileDB hands it to a query (offsets: uint64, see var_base)


class FragmentLike(Protocol):
    layout: str
    METADATA_FILE: str     # the file that locates the tiles (__fragment_metadata.tdb, __book_keeping.tdb.gz)
    name: str
    rel: str

    dense: bool
    def stored_fields(self) -> list: ...                 # fields with data files, in the metadata's order
    def dimensions(self) -> list[tuple]: ...             # (name, datatype) of each dimension
    def non_empty_domain(self): ...                      # (min, max) per dimension, or None
    def tile_count(self, idx: int | None = None) -> int: ...
    def cells_per_full_tile(self) -> int: ...
    def tile_cell_num(self, k: int) -> int: ...
    def cell_count(self) -> int: ...
    def location(self, field, k: int, stream: str) -> TileLocation: ...
    def unfiltered_size(self, field, k: int, stream: str) -> int: ...
    def tile(self, field, k: int, stream: str) -> DecodedTileLike: ...
    def decode_ahead(self, field, k: int, stream: str, reading: tuple[int, int] | None = None) -> None: ...
    def tile_served(self, field, k: int, stream: str, nbytes: int, whole: int) -> None: ...  # a reader got these bytes
    def var_base(self, field, k: int) -> int: ...         # what to take off stored offsets to make them tile-relative
    def coords_column(self, coords, k: int, j: int) -> np.ndarray: ...   # dimension j of a COORDS tile
    def coords_column_size(self, coords, k: int, j: int) -> int: ...
    def tile_statistics(self, field) -> list: ...         # [(label, one value per tile)] the metadata keeps
    def decode_metadata(self) -> int: ...                 # decode (and record) it all; generic tiles decoded
