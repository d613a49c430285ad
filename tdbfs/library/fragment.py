"""One fragment of an array (either layout: store/fragment_interface.py): its name, footer, fields, tiles
and cells, read as the mount reads them."""

from __future__ import annotations

from dataclasses import dataclass

from ..store.fragment_interface import DATA, VALIDITY, VAR, LEGACY0X, TileLocation, streams


@dataclass(frozen=True)
class Field:
    """A stored field of a fragment: an attribute, a dimension (of a sparse fragment), the `__coords` of
    formats 1-4 and 0.x, or what consolidation adds per cell (t, dt, dci)."""

    name: str
    stem: str             # its folder under attrs/ or dims/, and its data files' stem
    kind: str             # 'attribute', 'dimension', 'coords', 'timestamps', ...
    datatype: str         # the spec's name: INT32, STRING_UTF8, ...
    cell_val_num: int | None   # None: var-sized
    nullable: bool

    @property
    def var_sized(self) -> bool:
        return self.cell_val_num is None


@dataclass(frozen=True)
class TileInfo:
    """One data tile of one field, from the fragment metadata alone: tiles.csv's row for the field."""

    index: int
    cells: int
    data: TileLocation              # offsets (var-sized) or values: file, offset, persisted and decoded size
    var: TileLocation | None        # var-sized values
    validity: TileLocation | None   # nullable
    min: object = None              # format 11 on: what the metadata keeps per tile (None when it keeps none)
    max: object = None
    sum: object = None
    null_count: int | None = None


@dataclass(frozen=True, eq=False)
class VarTile:
    """A var-sized tile decoded: `offsets` (uint64, one per cell: where the cell starts in the bytes of
    `values`, as TileDB stores them), `values`, and for a nullable field `validity` (bool, one per cell).
    `tile[i]` is cell i's values."""

    offsets: object
    values: object
    validity: object = None

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: int):
        """The values of cell i."""
        n = len(self.offsets)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        size = self.values.dtype.itemsize
        end = int(self.offsets[i + 1]) if i + 1 < n else len(self.values) * size
        return self.values[int(self.offsets[i]) // size:end // size]

    def __repr__(self) -> str:
        return f"<tdbfs.VarTile {len(self)} cells, {len(self.values)} values of {self.values.dtype}>"


class Fragment:
    """A fragment folder. `raw` is the store's fragment object (store/fragment.py or legacy0x_fragment.py)."""

    def __init__(self, raw):
        self.raw = raw

    # -- name ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.raw.name

    @property
    def path(self) -> str:
        """The folder, relative to the array (`__fragments/<name>`, or `<name>` before format 12)."""
        return self.raw.rel

    @property
    def t1(self) -> int:
        """The start of the name's timestamp range, ms (0.x: the one time in its name)."""
        n = self.raw.parsed_name
        return n.timestamp_ms if self.raw.layout == LEGACY0X else n.t1

    @property
    def t2(self) -> int:
        n = self.raw.parsed_name
        return n.timestamp_ms if self.raw.layout == LEGACY0X else n.t2

    @property
    def timestamp_range(self) -> tuple[int, int]:
        return self.t1, self.t2

    @property
    def version(self) -> int | None:
        """The format version the footer records; None for TileDB 0.x, which records none."""
        if self.raw.layout == LEGACY0X:
            return None
        return self.raw.footer().version

    @property
    def dense(self) -> bool:
        return bool(self.raw.dense)

    @property
    def committed(self) -> bool:
        return self.raw.is_committed()

    # -- metadata ------------------------------------------------------------------------------
    @property
    def footer(self) -> dict:
        """Every footer field, in spec order, with footer.yaml's keys (0.x: the book-keeping's fields, as
        book_keeping.yaml shows them)."""
        if self.raw.layout == LEGACY0X:
            from ..views.describe.legacy0x import describe_book_keeping
            return describe_book_keeping(self.raw.book_keeping(), self.raw.schema())
        from ..views.fragment_views import footer_view
        return footer_view(self.raw)

    @property
    def non_empty_domain(self) -> tuple | None:
        """(min, max) of each dimension in schema order, as tiledb-py's FragmentInfo.nonempty_domain; None
        when the footer keeps none."""
        domain = self.raw.non_empty_domain()
        return None if domain is None else tuple((_plain(lo), _plain(hi)) for lo, hi in domain)

    @property
    def cell_count(self) -> int:
        return self.raw.cell_count()

    @property
    def tile_count(self) -> int:
        return self.raw.tile_count()

    @property
    def fields(self) -> list[Field]:
        return [Field(f.name, f.stem, f.kind, f.datatype.name, None if f.var_sized else int(f.cell_val_num),
                      bool(f.nullable)) for f in self.raw.stored_fields()]

    @property
    def files(self) -> dict[str, int]:
        """The folder's regular files: name -> size."""
        return dict(self.raw.files())

    @property
    def stats(self) -> tuple:
        """Per field: tiles, cells, stored and decoded bytes, filters (store.stats.FieldStats)."""
        from ..store.stats import fragment_stats
        return fragment_stats(self.raw)

    @property
    def problems(self) -> list:
        """What is wrong with this fragment as far as read: the list its fragment.yaml shows."""
        from ..store.problems import unique
        from ..views.fragment_views import fragment_summary
        fragment_summary(self.raw)   # what fragment.yaml reads, so that its findings are among these
        return unique(self.raw.store.fragment_findings(self.raw), self.raw.problems.items)

    # -- tiles -----------------------------------------------------------------------------------
    def field(self, name: str):
        """The store's field named `name` (an attribute or dimension name, or a stem such as a0, d1)."""
        fields = self.raw.stored_fields()
        for f in fields:
            if f.name == name:
                return f
        for f in fields:
            if f.stem == name:
                return f
        raise KeyError(f"{self.name}: no stored field {name!r} (fields: {[f.name for f in fields]})")

    def tiles(self, field: str) -> list[TileInfo]:
        """Every tile of `field`: where each stream of it is, its cells, and the tile min, max, sum and null
        count the metadata keeps."""
        f = self.field(field)
        n = self.raw.tile_count(f.idx)
        stats = {label: values for label, values in self.raw.tile_statistics(f)}
        have = streams(f)
        out = []
        for k in range(n):
            def stat(label):
                values = stats.get(label) or []
                return _plain(values[k]) if k < len(values) else None
            out.append(TileInfo(k, self.raw.tile_cell_num(k), self.raw.location(f, k, DATA),
                                self.raw.location(f, k, VAR) if VAR in have else None,
                                self.raw.location(f, k, VALIDITY) if VALIDITY in have else None,
                                stat("min"), stat("max"), stat("sum"), stat("null_count")))
        return out

    def tile(self, field: str, k: int):
        """Tile k of `field` decoded (every filter reversed): a numpy array of its values (one row per cell
        when a cell holds several; a masked array for a nullable field, nulls masked); a VarTile for a
        var-sized field. The bytes are those of attrs/<stem>/tile_K.bin (.var.bin, .validity.bin)."""
        import numpy as np

        f = self.field(field)
        dt = f.datatype.dtype
        data = self.raw.tile(f, k, DATA).data
        valid = None
        if f.nullable:
            valid = np.frombuffer(bytes(self.raw.tile(f, k, VALIDITY).data), np.uint8) != 0
        if f.var_sized:
            offsets = np.frombuffer(bytes(data), "<u8")
            base = self.raw.var_base(f, k)
            if base:
                offsets = offsets - np.uint64(base)
            return VarTile(offsets, np.frombuffer(bytes(self.raw.tile(f, k, VAR).data), dt), valid)
        values = np.frombuffer(bytes(data), dt)
        if f.cell_val_num > 1:
            values = values[: len(values) - len(values) % f.cell_val_num].reshape(-1, f.cell_val_num)
        if valid is None:
            return values
        mask = ~valid if values.ndim == 1 else np.repeat(~valid[:, None], values.shape[1], axis=1)
        return np.ma.masked_array(values, mask=mask[: len(values)])

    def tile_bytes(self, field: str, k: int, stream: str = DATA) -> bytes:
        """The decoded bytes of one stream of tile k ('data', 'var', 'validity'): tile_K[.var|.validity].bin."""
        f = self.field(field)
        return bytes(self.raw.tile(f, k, stream).data)

    def cells(self, tile: int | None = None) -> dict:
        """The cells of one tile, or of every tile: column name -> numpy array, the columns and rows of
        cells.csv (cells/tile_K.csv): dimensions, then attributes, then what consolidation adds. A dense tile
        gives its cells inside the non-empty domain. Strings and var-sized cells are object arrays; a
        nullable column is a masked array."""
        from .cells import fragment_cells
        return fragment_cells(self.raw, tile)

    def byte_map(self, file: str) -> list:
        """Who owns each byte of one of the fragment's files (store.byte_map.ByteRange: start, end, structure, detail):
        layout/<file>.csv. `file` is a name in the folder (`__fragment_metadata.tdb`, `a0.tdb`)."""
        from ..store.byte_map import file_map
        if self.raw.layout == LEGACY0X:
            from ..errors import TdbfsError
            raise TdbfsError(f"{self.name}: a TileDB 0.x fragment has no byte maps (its files hold no generic tiles)")
        return list(file_map(self.raw, file).ranges)

    def __repr__(self) -> str:
        try:
            version = "0.x" if self.version is None else f"v{self.version}"
            extra = f" {version} {'dense' if self.dense else 'sparse'}, {self.cell_count} cells"
        except Exception:  # noqa: BLE001 -- a repr never fails: the problems say why
            extra = " (metadata unreadable)"
        return f"<tdbfs.Fragment {self.name}{extra}>"


def _plain(v):
    """A numpy scalar as the Python value; bytes of a string dimension as str."""
    if hasattr(v, "item") and not isinstance(v, (bytes, str)) and getattr(v, "ndim", 0) == 0:
        return v.item()
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", errors="backslashreplace")
    return v
