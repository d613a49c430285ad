"""`hints:` of array.yaml: facts a reader of the array should act on, each with the numbers behind it."""

from __future__ import annotations

import numpy as np

from ..format.releases import oldest_reader
from ..store.fragment_overview import fragment_overviews

#: overlapping pairs named in the hint (all are counted)
OVERLAPS_SHOWN = 10

CONSOLIDATION_DOC = "https://docs.tiledb.com/main/background/internal-mechanics/consolidation"


def array_hints(store, schema_versions, overviews=None) -> list[dict]:
    """`overviews`: fragment_overviews(store), when the caller has made them already."""
    if overviews is None:
        overviews = fragment_overviews(store)
    live = [o for o in overviews if o.live]
    return [_fragment_count(store, overviews, live), _not_vacuumed(store, overviews), _overlaps(live),
            _format(overviews, schema_versions)]


def _fragment_count(store, overviews, live) -> dict:
    footers = len(store.fragment_meta_files())
    out = {"hint": "fragment_count", "fragments": len(overviews), "read_at_open": len(live),
           "consolidated_footer_files": footers}
    if len(live) <= 1:
        out["says"] = f"{len(live)} fragment read at open: nothing to consolidate"
        return out
    out["says"] = (f"{len(live)} fragments are read at open. TileDB advises consolidating numerous fragments: "
                   "each footer is loaded when the array opens, and one query's cells spread over many files "
                   f"({CONSOLIDATION_DOC}). Consolidate them (mode fragments), or at least their footers "
                   f"(mode fragment_meta; {footers} such files now)")
    return out


def _not_vacuumed(store, overviews) -> dict:
    stale = [o for o in overviews if o.to_vacuum]
    vacuum = store.vacuum_lists()
    files = sorted({vacuum[o.name] for o in stale if o.name in vacuum})
    size = sum(s for o in stale for _, s in store.fragment(o.rel).files())
    out = {"hint": "not_vacuumed", "vacuum_files": len(files), "fragments": len(stale), "bytes": size}
    if not stale:
        out["says"] = "no consolidated fragment is waiting to be vacuumed"
    else:
        listed = f"{len(files)} vacuum file" + ("s" if len(files) != 1 else "")
        out["says"] = (f"{len(stale)} fragments, {size} bytes, were consolidated (listed in {listed}) "
                       "but not vacuumed: readers skip them; vacuuming (mode fragments) removes them, and "
                       "with them reading the array at times before the consolidation")
        out["vacuum_files_named"] = files[:OVERLAPS_SHOWN]
    return out


def _overlaps(live) -> dict:
    drawn = [o for o in live if o.domain is not None]
    pairs, total = overlapping_pairs(drawn)
    out = {"hint": "overlapping_fragments", "fragments_compared": len(drawn), "pairs": total}
    if not total:
        out["says"] = "no two fragments read at open have intersecting non-empty domains"
        return out
    out["says"] = (f"{total} pairs of fragments read at open have intersecting non-empty domains: a read of the "
                   "intersection merges them, the newest fragment's cells winning (sparse arrays that allow "
                   "duplicates return them all)")
    out["first_pairs"] = [[drawn[i].name, drawn[j].name] for i, j in pairs]
    return out


def overlapping_pairs(overviews) -> tuple[list[tuple[int, int]], int]:
    """(the first OVERLAPS_SHOWN pairs (i, j), i < j, whose domains intersect on every dimension, how many
    there are). Domain bounds become their ranks per dimension, so strings and numbers of any width
    compare exactly. Equal domains are counted together, and a sweep along the dimension where the fewest
    domains meet compares each domain only with those it meets there: 100,000 fragments of one domain, or
    appended side by side, cost a sort, not 5 billion comparisons."""
    n = len(overviews)
    if n < 2:
        return [], 0
    ndim = min(len(o.domain) for o in overviews)
    lo = np.empty((n, ndim), np.int64)
    hi = np.empty((n, ndim), np.int64)
    for d in range(ndim):
        values = sorted({v for o in overviews for v in o.domain[d]}, key=_order_key)
        rank = {v: r for r, v in enumerate(values)}
        lo[:, d] = [rank[o.domain[d][0]] for o in overviews]
        hi[:, d] = [rank[o.domain[d][1]] for o in overviews]
    boxes, box_of, count = np.unique(np.concatenate([lo, hi], axis=1), axis=0, return_inverse=True,
                                     return_counts=True)
    box_of = box_of.reshape(-1)
    blo, bhi = boxes[:, :ndim], boxes[:, ndim:]
    count = count.astype(np.int64)
    own = (blo <= bhi).all(axis=1)           # a domain with lo > hi (damage) does not meet its equal
    total = int((count * (count - 1) // 2)[own].sum())
    met = (count > 1) & own                  # boxes that meet another domain: only their rows are scanned
    # the sweep: boxes sorted by lo on dimension d, each compared with the boxes whose lo falls in its range
    ends = [np.searchsorted(np.sort(blo[:, d]), bhi[np.argsort(blo[:, d], kind="stable"), d], side="right")
            for d in range(ndim)]
    reach = [int(np.maximum(e - np.arange(1, len(e) + 1), 0).sum()) for e in ends]
    d = int(np.argmin(reach))
    order = np.argsort(blo[:, d], kind="stable")
    slo, shi, scount = blo[order], bhi[order], count[order]
    for u, end in enumerate(ends[d]):
        if end <= u + 1:
            continue
        v = slice(u + 1, end)
        hit = ((slo[v] <= shi[u]) & (slo[u] <= shi[v])).all(axis=1)
        if hit.any():
            total += int(scount[u] * scount[v][hit].sum())
            met[order[u]] = True
            met[order[v][hit]] = True
    return _first_pairs(lo, hi, met[box_of]), total


def _first_pairs(lo, hi, met) -> list[tuple[int, int]]:
    """The first OVERLAPS_SHOWN pairs (i, j), i < j, in order, among the rows `met` marks."""
    rows = np.nonzero(met)[0]
    shown: list[tuple[int, int]] = []
    for i in rows:
        later = rows[rows > i]
        hit = ((lo[later] <= hi[i]) & (lo[i] <= hi[later])).all(axis=1)
        shown += [(int(i), int(j)) for j in later[hit][:OVERLAPS_SHOWN - len(shown)]]
        if len(shown) >= OVERLAPS_SHOWN:
            break
    return shown


def _order_key(v):
    # bounds of one dimension share a type; numpy scalars and Python numbers compare as numbers
    if isinstance(v, (bytes, bytearray, str)):
        return (1, v if isinstance(v, str) else bytes(v).decode("latin-1"), 0)
    return (0, "", v)


def _format(overviews, schema_versions) -> dict:
    versions = [o.format_version for o in overviews if o.format_version is not None] + list(schema_versions)
    out = {"hint": "format"}
    if not versions:
        out["says"] = "no fragment or schema gives a format version"
        return out
    newest = max(versions)
    reader = oldest_reader(newest)
    out.update({"newest_format": newest, "oldest_reader": reader})
    out["says"] = (f"format {newest}: {reader} reads every schema and fragment (docs/format.md §6.2)" if reader
                   else f"format {newest} is in no TileDB release")
    return out
