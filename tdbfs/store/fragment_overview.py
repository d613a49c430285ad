"""What the array-wide pictures and hints need of each fragment: its time span, non-empty domain and
state, from its name, footer (0.x: book-keeping) and the commit files, through its digest
(store/fragment_digest.py: the footer parsed once for every summary); never a tile."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from .digest_pool import digests_ahead
from .fragment_digest import fragment_digest


@dataclass(frozen=True)
class FragmentOverview:
    name: str
    rel: str
    t1: int | None                 # ms since the epoch (0.x: the one timestamp of the name)
    t2: int | None
    format_version: int | None
    dense: bool | None
    dimensions: tuple              # names
    domain: tuple | None           # (min, max) per dimension; None when the fragment keeps none
    consolidated: bool             # written by consolidation: a vacuum file names it, or t1 < t2
    to_vacuum: bool                # a vacuum file lists it: a reader skips it
    committed: bool
    error: str | None = None       # why the rest is unknown (its problem is recorded with the fragment)

    @property
    def live(self) -> bool:
        """What a reader of the array at the newest time opens."""
        return self.committed and not self.to_vacuum and self.error is None


def fragment_overviews(store) -> list[FragmentOverview]:
    """Every fragment of the array, in time order (t1, t2, then name)."""
    vacuum = store.vacuum_lists()  # (a 0.x array has no commit files: empty)
    consolidators = {posixpath.basename(v)[:-len(".vac")] for v in set(vacuum.values())}
    rels = store.fragment_paths()
    digests_ahead(store, rels)
    out = [_overview(rel, fragment_digest(store, rel), vacuum, consolidators) for rel in rels]
    return sorted(out, key=lambda o: (o.t1 if o.t1 is not None else -1, o.t2 or -1, o.name))


def _overview(rel: str, d, vacuum: dict, consolidators: set) -> FragmentOverview:
    name = posixpath.basename(rel)
    t1, t2, version, dense, dims, domain, footer_version = d.shape
    consolidated = name in consolidators or (t1 is not None and t2 is not None and t1 < t2)
    if d.shape_error is not None:
        return FragmentOverview(name, rel, t1, t2, version, None, (), None, consolidated, name in vacuum, False,
                                d.shape_error)
    return FragmentOverview(name, rel, t1, t2, footer_version if footer_version is not None else version, dense,
                            dims, domain, consolidated, name in vacuum, d.committed)
