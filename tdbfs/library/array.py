"""An array (TileDB formats 1 to 22, or a TileDB 0.x array): its schemas, fragments, metadata, history,
findings, and the array as a reader opened at a time T sees it."""

from __future__ import annotations

import datetime
import posixpath
from collections.abc import Sequence

from ..errors import NotFoundError
from .base import StoreObject


class Array(StoreObject):
    """An opened array. Everything is read lazily, the first time it is asked for, and kept (within the
    cache_mb given to tdbfs.open) as the mount keeps it."""

    kind = "array"

    @property
    def legacy0x(self) -> bool:
        """Whether this is a TileDB 0.x array (no footers, a book-keeping per fragment)."""
        return self.store.legacy0x_layout is not None

    # -- schemas ------------------------------------------------------------------------------
    @property
    def schema(self):
        """The decoded schema in force: the latest of `__schema/` (or the legacy `__array_schema.tdb`; for
        0.x, its schema): every field of the spec (format.schema.ArraySchema)."""
        if self.legacy0x:
            return self.store.legacy0x_schema()
        latest = self.store.latest_schema_file()
        if latest is None:
            raise NotFoundError(f"{self.uri}: no schema file")
        return self.store.schema(latest)

    @property
    def schemas(self) -> dict:
        """Every schema file's name -> its decoded schema, in the order of `schema/` in the tree."""
        if self.legacy0x:
            return {"__array_schema.tdb": self.store.legacy0x_schema()}
        return {posixpath.basename(rel): self.store.schema(rel) for rel in self.store.schema_files()}

    # -- fragments ----------------------------------------------------------------------------
    @property
    def fragments(self) -> "Fragments":
        """Every fragment folder, committed or not, in the order of `fragments/` in the tree."""
        return Fragments(self.store, self.store.fragment_paths())

    # -- array-wide ---------------------------------------------------------------------------
    @property
    def metadata(self) -> dict:
        """The array metadata a reader sees (every `__meta` file applied in time order, vacuumed ones
        skipped): key -> value (a str, bytes, a number, or a list of numbers)."""
        if self.legacy0x:
            return {}
        return {k: r.value for k, r in self.store.merged_metadata().records.items() if not r.deleted}

    @property
    def timeline(self) -> list:
        """Every event the array's files record, in time order (store.timeline.Event: time_ms, event,
        subject, file, ...): the rows of timeline.csv."""
        from ..store.timeline import timeline
        return timeline(self.store)

    @property
    def stats(self) -> dict:
        """Fragment name -> its per-field figures (store.stats.FieldStats: tiles, cells, stored and decoded
        bytes, filters): what stats.csv lists, from the metadata alone."""
        return {f.name: f.stats for f in self.fragments}

    def _summary(self) -> dict:
        """array.yaml's content, rendered as the mount renders it (one pass over listings and footers)."""
        if self.legacy0x:
            from ..views.legacy0x_views import array_summary
        else:
            from ..views.array_views import array_summary
        from ..store.pass_gc import fewer_collections
        with self.store.one_pass():
            with self.store.digests.render(self.store.summary_state()), fewer_collections():
                return array_summary(self.store)

    @property
    def problems(self) -> list:
        """What is wrong, as far as read so far (problem.Problem: file, structure, offset, message,
        severity): the list array.yaml shows. `check()` reads everything first."""
        self._summary()
        return self.store.findings()

    @property
    def hints(self) -> list:
        """States TileDB leaves on purpose (consolidated but not vacuumed, overlapping fragments, ...), as
        array.yaml's `hints:` lists them."""
        return self._summary().get("hints", [])

    # -- cells ------------------------------------------------------------------------------------
    def cells(self, as_of=None, subarray=None, fragment=None):
        """The cells a TileDB read of the array opened at `as_of` (ms, a datetime, 'now' or None: now)
        returns, each with its source: the rows of `as_of/<T>/cells.csv`. `subarray`: inclusive ranges by
        dimension name, typed as the `as_of/<T>/cells/` file names are ('d0=10..20,d1=5..9'). `fragment`
        (a fragment's name, instead of a time): the cells that fragment stores, as it stores them.

        With pyarrow (the `[parquet]` extra): a pyarrow.Table with TileDB's types (library/arrow_columns.py),
        then `fragment` and `tile` (null for a dense fill value). Without: a dict of column name -> numpy
        values as Fragment.cells gives them, then `fragment` (names, None for a fill value) and `tile`
        (masked for a fill value). Holds every cell selected: for a large array, `export` streams."""
        from .cell_batches import select_cells
        from .export import cells_columns, cells_table

        cells = select_cells(self.store, _time_or_none(as_of), subarray, fragment)
        try:
            import pyarrow  # noqa: F401 -- the extra chooses the type returned
        except ImportError:
            return cells_columns(cells)
        return cells_table(cells)

    def export(self, out, as_of=None, subarray=None, fragment=None, overwrite: bool = False) -> int:
        """Write `cells(as_of, subarray, fragment)` to `out`, batch by batch: a path ending in .csv (the
        bytes of `as_of/<T>/cells.csv`) or .parquet (the `[parquet]` extra), or '-' (CSV on stdout).
        FileExistsError when `out` exists, unless `overwrite`. Returns the number of cells written."""
        from .cell_batches import select_cells
        from .export import export_cells, output_format

        output_format(out)   # a bad name fails before anything is read
        return export_cells(select_cells(self.store, _time_or_none(as_of), subarray, fragment), out, overwrite)

    def as_of(self, t) -> "AsOf":
        """The array as TileDB opened at timestamp `t` sees it: `t` in ms since the epoch, a datetime, or
        'now'."""
        return AsOf(self, _milliseconds(t))

    def _repr_extra(self) -> str:
        try:
            n = len(self.store.fragment_paths())
        except Exception:  # noqa: BLE001 -- a repr never fails
            return ""
        return f" ({'0.x, ' if self.legacy0x else ''}{n} fragments)"


class Fragments(Sequence):
    """The fragments of an array: indexable by position (as listed) and by folder name."""

    def __init__(self, store, paths):
        self._store = store
        self._paths = list(paths)
        self._by_name = {posixpath.basename(p): i for i, p in enumerate(self._paths)}

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, key):
        from .fragment import Fragment

        if isinstance(key, str):
            i = self._by_name.get(key)
            if i is None:
                raise KeyError(f"no fragment named {key!r}")
            key = i
        if isinstance(key, slice):
            return [Fragment(self._store.fragment(p)) for p in self._paths[key]]
        return Fragment(self._store.fragment(self._paths[key]))

    def __contains__(self, item) -> bool:
        if isinstance(item, str):
            return item in self._by_name
        return getattr(item, "name", None) in self._by_name

    def names(self) -> list[str]:
        return list(self._by_name)

    def __repr__(self) -> str:
        shown = ", ".join(self.names()[:3]) + (", ..." if len(self) > 3 else "")
        return f"<tdbfs.Fragments: {len(self)} [{shown}]>"


class AsOf:
    """The array as a reader opening it at `t` (ms) sees it: the `as_of/<t>/` folder of the tree."""

    def __init__(self, array: Array, t: int):
        self.array = array
        self.t = t

    @property
    def fragments(self) -> Fragments:
        """The fragments TileDB reads at `t`, in its order."""
        from ..store.as_of import reader_fragments
        return Fragments(self.array.store, reader_fragments(self.array.store, self.t).fragments)

    @property
    def schema(self):
        from ..store.as_of import schema_as_of
        rel = schema_as_of(self.array.store, self.t)
        return None if rel is None else self.array.store.schema(rel)

    @property
    def metadata(self) -> dict:
        from ..store.as_of import metadata_as_of
        merged = metadata_as_of(self.array.store, self.t)
        return {k: r.value for k, r in merged.records.items() if not r.deleted}

    def cells(self, subarray=None):
        """The cells TileDB returns at `t`: Array.cells(as_of=t, subarray=subarray)."""
        return self.array.cells(as_of=self.t, subarray=subarray)

    def export(self, out, subarray=None, overwrite: bool = False) -> int:
        """Array.export(out, as_of=t, ...)."""
        return self.array.export(out, as_of=self.t, subarray=subarray, overwrite=overwrite)

    def open_view(self, path: str) -> bytes:
        """A file of `as_of/<t>/` (reader.yaml, schema.yaml, metadata.yaml)."""
        return self.array.open_view(f"as_of/{self.t}/{path}")

    def listdir(self, path: str = "") -> list[str]:
        return self.array.listdir(f"as_of/{self.t}/{path}".rstrip("/"))

    def __repr__(self) -> str:
        return f"<tdbfs.AsOf {self.array.uri!r} at {self.t} ms>"


def _time_or_none(t):
    return None if t is None else _milliseconds(t)


def _milliseconds(t) -> int:
    if isinstance(t, str) and t == "now":
        return int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return int(t.timestamp() * 1000)
    value = int(t)
    if value < 0:
        raise ValueError(f"a time is a number of ms since 1970, not {t!r}")
    return value
