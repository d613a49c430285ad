"""The cells a TileDB read of the array opened at time T returns, computed from the store's decoded tiles,
streaming, each with its source (fragment and tile). Layer 3: it reads the store, the views read it.

`read_cells(store, as_of, subarray)` is the one entry: it makes the ReadPlan (plan.py) and hands the
batches of the dense (dense.py) or sparse (sparse.py) reader.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Iterator

from .batch import NO_SOURCE, CellBatch, ReadPlan  # noqa: F401
from .plan import ReadError, make_plan  # noqa: F401


@dataclass(frozen=True)
class CellRead:
    """One read: its plan, its columns (name, kind, datatype, nullable) and fragment names, and `batches()`,
    a fresh iterator of CellBatch each time it is called."""
    store: object
    plan: ReadPlan
    schema: object
    batch_cells: int

    @property
    def fragment_names(self) -> list[str]:
        return [posixpath.basename(rel) for rel in self.plan.fragments]

    @property
    def column_names(self) -> list[str]:
        """The columns' names: the dimensions, then the attributes (schema order)."""
        return [d.name for d in self.schema.dimensions] + [a.name for a in self.schema.attributes]

    @property
    def fields(self) -> list:
        """format.schema Dimension and Attribute of each column, in order."""
        return list(self.schema.dimensions) + list(self.schema.attributes)

    def __iter__(self) -> Iterator[CellBatch]:
        return self.batches()

    def batches(self) -> Iterator[CellBatch]:
        if self.schema.dense:
            from .dense import dense_batches
            return dense_batches(self.store, self.plan, self.batch_cells)
        from .sparse import sparse_batches
        return sparse_batches(self.store, self.plan, self.batch_cells)


def read_cells(store, as_of: int | None = None, subarray=None, batch_cells: int = 1 << 16) -> CellRead:
    """The read of the array at `as_of` (ms; None: now), restricted to `subarray` (a ReadPlan subarray, or
    text for reader.subarray.parse_subarray). ReadError when TileDB would refuse it."""
    plan = make_plan(store, as_of)
    schema = store.schema(plan.schema_rel)
    if isinstance(subarray, str):
        from .subarray import parse_subarray
        subarray = parse_subarray(subarray, schema)
    if subarray is not None:
        plan = ReadPlan(plan.timestamp, plan.schema_rel, plan.fragments, tuple(subarray))
    return CellRead(store, plan, schema, batch_cells)
