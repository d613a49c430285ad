"""What the array-wide pictures and hints need of each fragment: its time span, non-empty domain and
state, from its name, footer (0.x: book-keeping) and the commit files; never a tile."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from .fragment_interface import LEGACY0X


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
    committed = store.kept_committed_fragment_names()   # within a summary's pass: the commits listed already
    out = [_overview(store, rel, vacuum, consolidators, committed) for rel in store.fragment_paths()]
    return sorted(out, key=lambda o: (o.t1 if o.t1 is not None else -1, o.t2 or -1, o.name))


def _overview(store, rel: str, vacuum: dict, consolidators: set, committed: dict | None) -> FragmentOverview:
    name = posixpath.basename(rel)
    # a committed fragment's overview, once kept, is made without the fragment object or a parse of its name
    kept = store.cache.get(("fragment overview", store.path, rel, 0)) \
        if committed is not None and name in committed else None
    if kept is None:
        frag = store.fragment(rel)
        try:
            is_committed = frag.committed
            kept = store.cache.get_or_make(("fragment overview", store.path, rel, frag.cache_token()),
                                           lambda: (_times(frag) + _shape(frag), 512))
        except Exception as exc:  # noqa: BLE001 -- recorded by the fragment's own parse
            t1, t2, version = _times(frag)
            return FragmentOverview(format_version=version, dense=None, dimensions=(), domain=None, committed=False,
                                    error=str(exc), **_state(name, rel, t1, t2, vacuum, consolidators))
    else:
        is_committed = True
    t1, t2, version, dense, dims, domain, footer_version = kept
    return FragmentOverview(format_version=footer_version if footer_version is not None else version,
                            dense=dense, dimensions=dims, domain=domain, committed=is_committed,
                            **_state(name, rel, t1, t2, vacuum, consolidators))


def _state(name, rel, t1, t2, vacuum: dict, consolidators: set) -> dict:
    consolidated = name in consolidators or (t1 is not None and t2 is not None and t1 < t2)
    return dict(name=name, rel=rel, t1=t1, t2=t2, consolidated=consolidated, to_vacuum=name in vacuum)


def _times(frag) -> tuple:
    """(t1, t2, format version) from the fragment's name; None each when it does not parse."""
    try:
        if frag.layout == LEGACY0X:
            t = frag.parsed_name.timestamp_ms
            return t, t, None
        n = frag.parsed_name
        return n.t1, n.t2, n.assumed_format_version
    except Exception:  # noqa: BLE001 -- the name's problem is the fragment's (store/findings.py)
        return None, None, None


def _shape(frag) -> tuple:
    dims = tuple(name for name, _ in frag.dimensions())
    domain = frag.non_empty_domain()
    domain = None if domain is None else tuple((lo, hi) for lo, hi in domain)
    version = None if frag.layout == LEGACY0X else frag.footer().version
    return frag.dense, dims, domain, version
