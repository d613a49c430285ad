"""One fragment as the array-wide summaries need it, made from one read of its listing and footer.

`array.yaml`, `stats.csv` and `fragments.svg` each ask every fragment for something its footer says
(times and domain, per-field counts and sizes, what its listing and footer show is wrong). A parsed
footer costs kilobytes, and the store's bounded cache does not hold 100,000 of them: asking each
summary's question of the fragment object would parse every footer once per summary. A digest
answers all three questions at once, in a few hundred bytes, and a committed fragment's digest is
kept in a table of its own (`DigestTable`) that a pass over the footers cannot evict: reading the
four summaries parses each footer once.

A committed fragment's files are taken as written for good (TileDB never rewrites them), as the
summaries' own cache does (`store.summary_state`); but each render of `array.yaml` checks a kept
digest against its folder's listing (`kept_findings`) and makes it again when the folder changed, so a
file damaged or removed since shows there, and in the other summaries from then on. A fragment not
committed (still being written) is never kept.
"""

from __future__ import annotations

import posixpath
import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

from .fragment_interface import LEGACY0X

#: bytes a digest costs: 679 measured with tracemalloc for a fragment of one attribute and one dimension
#: (tests/test_summaries_one_pass.py), its place in the table included; names and filters are shared
DIGEST_COST = 720
#: and per stored field beyond the first (a FieldStats and its numbers), and per finding
FIELD_COST = 200
FINDING_COST = 400
#: the table's bound is this share of the store's cache (--cache-mb), and at least DIGEST_MIN_BYTES: the
#: default 512 MiB keeps the digests of 100,000 fragments of three fields (1 KiB each)
DIGEST_SHARE = 4
DIGEST_MIN_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class FragmentDigest:
    #: (t1, t2, format version from the name, dense, dimension names, non-empty domain, footer version);
    #: the last four None when the footer does not decode (`shape_error`)
    shape: tuple
    shape_error: str | None
    stats: tuple | None           # store/stats.py FieldStats per stored field, None when `stats_error`
    stats_error: str | None
    findings: tuple               # store.fragment_findings(frag): the listing's, the commits' and the footer's
    folder: int                   # hash of the folder's signature the findings were made from
    #: (bytes, entries) of what is not a folder in it, as array.yaml's sizes count them; None with sub-folders
    usage: tuple | None
    committed: bool               # a commit marked it (the only kind kept)

    @property
    def cost(self) -> int:
        return DIGEST_COST + FIELD_COST * max(0, len(self.stats or ()) - 1) + FINDING_COST * len(self.findings)


class DigestTable:
    """Committed fragments' digests by relative path, least recently used dropped past `capacity` bytes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._render = threading.local()   # .seen: the fragments whose digest this render made or checked
        # (summary state, fragments): those a whole render made or checked under that state
        self._checked_under: tuple | None = None

    @contextmanager
    def render(self, state=None):
        """A summary's render: a digest made or checked in it was made from the listings it sees, and is not
        checked against them again (array.yaml makes the digests for its hints, lists the findings, then
        the sizes). `state`: store.summary_state() as the render starts; a later render under the same state
        takes what a whole render checked as checked (array.yaml is rendered again whenever the background
        check marks more as checked, and its listings, commits and problems found are the same: listing
        100,000 fragment folders again then would tell nothing new)."""
        outer = getattr(self._render, "seen", None) is not None
        if not outer:
            self._render.seen = set()
            self._render.state = state
        try:
            yield
        except BaseException:
            if not outer:
                self._render.seen = self._render.state = None
            raise
        if not outer:
            seen, self._render.seen, self._render.state = self._render.seen, None, None
            if state is not None:
                with self._lock:
                    before = self._checked_under
                    if before is not None and before[0] == state:
                        seen |= before[1]   # stats.csv checks none of the digests array.yaml checked
                    self._checked_under = (state, seen)

    def seen_now(self, rel: str) -> bool:
        seen = getattr(self._render, "seen", None)
        if seen is None:
            return False
        if rel in seen:
            return True
        state = self._render.state
        with self._lock:
            before = self._checked_under
        return state is not None and before is not None and before[0] == state and rel in before[1]

    def note_seen(self, rel: str) -> None:
        seen = getattr(self._render, "seen", None)
        if seen is not None:
            seen.add(rel)

    def usage_seen(self) -> dict:
        """Folder -> (bytes, entries) of the fragment folders listed for this render's digests."""
        seen = getattr(self._render, "seen", None) or ()
        with self._lock:
            got = {rel: self._items.get(rel) for rel in seen}
        return {rel: d.usage for rel, d in got.items() if d is not None and d.usage is not None}

    def get(self, rel: str) -> FragmentDigest | None:
        with self._lock:
            d = self._items.get(rel)
            if d is not None:
                self._items.move_to_end(rel)
            return d

    def put(self, rel: str, d: FragmentDigest) -> None:
        with self._lock:
            old = self._items.pop(rel, None)
            if old is not None:
                self._bytes -= old.cost
            self._items[rel] = d
            self._bytes += d.cost
            while self._bytes > self.capacity:
                _, gone = self._items.popitem(last=False)
                self._bytes -= gone.cost

    def discard(self, rel: str) -> None:
        with self._lock:
            d = self._items.pop(rel, None)
            if d is not None:
                self._checked_under = None
                self._bytes -= d.cost

    def forget_except(self, live) -> None:
        """Drop the digests of fragments no longer listed."""
        with self._lock:
            for rel in set(self._items) - set(live):
                self._bytes -= self._items.pop(rel).cost
                self._checked_under = None

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size_bytes(self) -> int:
        return self._bytes


def digest_table(cache_capacity: int) -> DigestTable:
    return DigestTable(max(cache_capacity // DIGEST_SHARE, DIGEST_MIN_BYTES))


def fragment_digest(store, rel: str) -> FragmentDigest:
    """The digest of the fragment folder `rel`: the kept one of a committed fragment, else made from the
    fragment (and kept if it is committed and decoded whole)."""
    committed = _committed(store, rel)
    kept = store.digests.get(rel) if committed else None
    if kept is not None:
        return kept
    d = _make(store, store.fragment(rel))
    store.digests.note_seen(rel)
    if committed and d.shape_error is None and d.stats_error is None:
        store.digests.put(rel, d)
    else:
        store.digests.discard(rel)   # one kept before its commit vanished, or its files changed
    return d


def kept_findings(store, rel: str) -> tuple | None:
    """The findings of the committed fragment `rel` as its kept digest has them while its folder lists the
    same entries, else as a digest made again has them (array.yaml); None when no digest is kept: the
    caller asks the fragment (`tdbfs check`, which must not decode what a summary would)."""
    kept = store.digests.get(rel)
    if kept is None or not _committed(store, rel):
        return None
    if store.digests.seen_now(rel) or kept.folder == _folder(store, rel):
        store.digests.note_seen(rel)
        return kept.findings
    store.digests.discard(rel)   # a committed fragment's files changed on disk: what else it says may have too
    return fragment_digest(store, rel).findings


def _committed(store, rel: str) -> bool:
    names = store.kept_committed_fragment_names()   # within a summary's pass: the commits listed already
    return store.fragment(rel).committed if names is None else posixpath.basename(rel) in names


def _folder(store, rel: str) -> int:
    """The folder's signature hashed: what a digest's findings were made from."""
    return hash(store.fragment(rel).signature())


def _make(store, frag) -> FragmentDigest:
    from .stats import field_stats
    times = _times(frag)
    shape_error = stats_error = None
    try:
        shape = times + _shape(frag)
    except Exception as exc:  # noqa: BLE001 -- recorded by the fragment's own parse
        shape, shape_error = times + (None, None, None, None), str(exc)
    try:
        stats = tuple(_shared(s) for s in field_stats(frag))
    except Exception as exc:  # noqa: BLE001 -- recorded by the fragment's own parse
        stats, stats_error = None, str(exc)
    findings = tuple(store.fragment_findings(frag))
    entries = store.entries(frag.rel)
    usage = None if any(e.is_dir for e in entries) else (sum(e.size for e in entries), len(entries))
    return FragmentDigest(shape, shape_error, stats, stats_error, findings, _folder(store, frag.rel), usage,
                          frag.committed)


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
    dims = tuple(sys.intern(name) for name, _ in frag.dimensions())
    domain = frag.non_empty_domain()
    domain = None if domain is None else tuple((lo, hi) for lo, hi in domain)
    version = None if frag.layout == LEGACY0X else frag.footer().version
    return frag.dense, dims, domain, version


def interned(d: FragmentDigest, folder: int) -> FragmentDigest:
    """A digest made in another process, with `folder` hashed here and its names shared as `_make` shares them."""
    shape = d.shape if d.shape_error is not None else d.shape[:4] + (tuple(sys.intern(n) for n in d.shape[4]),) + d.shape[5:]
    stats = None if d.stats is None else tuple(_shared(s) for s in d.stats)
    return FragmentDigest(shape, d.shape_error, stats, d.stats_error, d.findings, folder, d.usage, d.committed)


def _shared(s):
    """FieldStats with its names and filters interned: 100,000 fragments of one schema share them."""
    # built anew: dataclasses.replace took 1.5 s of a pass over 100,000 fragments (cProfile)
    return type(s)(field=sys.intern(s.field), stem=sys.intern(s.stem), kind=sys.intern(s.kind), tile_count=s.tile_count,
                   cell_count=s.cell_count, stored_bytes=s.stored_bytes, decoded_bytes=s.decoded_bytes,
                   filters=sys.intern(s.filters))
