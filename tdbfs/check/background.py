"""A mount's check of its own array, in the background (`-o check=metadata|full|off`).

Right after a local array is mounted, a thread checks what `tdbfs check` checks, one unit at a time,
through the mount's own store: the array-level files (schemas, enumerations, array metadata, commits),
every fragment's metadata (its name, listing, footer, every generic tile of `__fragment_metadata.tdb`:
R-tree, tile offsets against the file sizes, ...), then the consolidated fragment metadata; with `full`,
every data tile of each fragment as well. The units are work.py's and check.py's own, and their
findings go into the store's logs, so array.yaml shows what `tdbfs check` prints for those structures,
and its `checked:` (store/checked.py) says how far that goes. A group is checked member by member.

Readers come first:
- the thread waits while a FUSE request is in flight, and until none has come for `QUIET_S`
  (`Requests`, counted by the mount around every callback), before each unit: a fragment's metadata,
  or one data tile. A reader thus waits at most for the unit under way (the GIL is handed over every
  5 ms meanwhile). A reader that never pauses gets one unit a second beside it (PATIENCE_S), so the
  check is never starved for good.
- it is not given a lower OS priority: with the GIL, a thread that the kernel holds back while it holds
  the lock would hold back every request thread with it (a priority inversion); and os.nice is per
  process on most systems. Stepping aside between units is what makes room for readers.
- it reads through the store's cache, within its bound, as any reader does.
- it starts once the mount is live and quiet (nothing is imported for it before), and stops between
  two units when the mount ends (`stop`). After a whole pass it looks again now and then for
  fragments written since, which it checks as they come.

Object stores: every unit costs requests, so their default is `off` (`default_level`).
"""

from __future__ import annotations

import logging
import threading
import time

from ..store.checked import FULL, METADATA, OFF  # noqa: F401 -- METADATA: the default of a local array
from ..store.stopping import Stopped

log = logging.getLogger("tdbfs.check")

#: a unit starts only once no request has come for this long: the gaps within one reader's requests
#: (a `cat`, an `ls -R`) are far shorter, so a reader is not interleaved with the check
QUIET_S = 0.02
#: ... or once it has waited this long for such a gap: a reader that never pauses (a `cat` of many GB, a
#: script polling array.yaml) shares the daemon with one unit a second, and the check still ends
PATIENCE_S = 1.0
#: the first unit (and the imports it needs: numpy, the codecs) waits for a longer pause: the commands a
#: user types right after `tdbfs mount` come first
START_QUIET_S = 0.5
#: how often a finished check looks for fragments written since
WATCH_S = 1.0


def default_level(location: str) -> str:
    """`metadata` for a local array, `off` for one in an object store (s3://, gs://, az://)."""
    from ..location import is_url
    return OFF if is_url(location) else METADATA


class Requests:
    """FUSE requests in flight, and when the last one ended: the mount enters it around every callback."""

    def __init__(self):
        self._lock = threading.Lock()
        self.busy = 0
        self.last = 0.0

    def __enter__(self):
        with self._lock:
            self.busy += 1

    def __exit__(self, *exc):
        with self._lock:
            self.busy -= 1
            self.last = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight."""
        with self._lock:
            return 0.0 if self.busy else time.monotonic() - self.last


#: the requests of this process's mount
REQUESTS = Requests()


class BackgroundCheck:
    """The thread that checks `store` at `level` (METADATA or FULL) while `requests` leaves room."""

    def __init__(self, store, level: str, requests: Requests = REQUESTS):
        self.store, self.level, self.requests = store, level, requests
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._settled: dict = {}   # id(store) -> its fragment listing when every fragment in it was checked
        if level != OFF:
            # said before the mount serves: array.yaml read before the thread starts tells that it comes
            store.checked.background(level, True)

    def start(self) -> None:
        if self.level == OFF or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="tdbfs-check", daemon=True)
        self._thread.start()

    def after(self, on_init):
        """`on_init` (the mount is live), then this check started."""
        def started():
            if on_init is not None:
                on_init()
            self.start()
        return started

    def stop(self, timeout: float = 5.0) -> None:
        """Stop between two units, and wait for it (at most `timeout` s: a unit under way ends first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------------------
    def _idle(self, wanted: float = QUIET_S) -> bool:
        """Wait until no request has come for `wanted` s (PATIENCE_S at most); False once stopped."""
        give_up = time.monotonic() + PATIENCE_S
        while not self._stop.is_set():
            quiet = self.requests.quiet_for()
            if quiet >= wanted or time.monotonic() >= give_up:
                return True
            self._stop.wait(max(wanted - quiet, 0.005))
        return False

    def _run(self) -> None:
        if not self._idle(START_QUIET_S):   # nothing imported before: a fresh mount's first requests come first
            return
        try:
            log.info("background check (%s) of %s started", self.level, self.store.path)
            stores = self._stores()
            for store in stores:   # said at once: array.yaml read meanwhile tells the check is coming
                store.checked.background(self.level, True)
            while not self._stop.is_set():
                t0 = time.monotonic()
                did = 0
                for store in stores:
                    did += self._pass(store)
                    if self._stop.is_set():
                        return
                for store in stores:   # a group's members too: its group.yaml counts them
                    store.checked.background(self.level, False)
                if did:
                    log.info("background check (%s) of %s: %d units in %.2f s", self.level, self.store.path, did,
                             time.monotonic() - t0)
                if self._stop.wait(WATCH_S):
                    return
                stores = self._stores()
        except Stopped:   # the mount is gone (store/stopping.py)
            return
        except Exception:  # noqa: BLE001 -- a bug here must never take the mount down
            log.exception("background check of %s stopped", self.store.path)

    def _stores(self) -> list:
        """The array stores to check: the mounted one, a 0.x workspace's arrays, a group's members (recursively)."""
        from ..store.group_store import GroupStore
        out, todo, seen = [], [self.store], set()
        while todo:
            store = todo.pop(0)
            if id(store) in seen:
                continue
            seen.add(id(store))
            if isinstance(store, GroupStore):
                out.append(store)
                todo += _members(store)
            elif store.legacy0x_layout == "workspace":
                todo += [store.array(rel) for rel in store.array_paths()]
            else:
                out.append(store)
        return out

    def _pass(self, store) -> int:
        """Check what is not checked yet in `store`, in check.py's order; the units done."""
        from ..store.checked import array_files
        from ..store.group_store import GroupStore
        done = 0
        files = store.checked.files_unchecked(array_files(store))
        array = not isinstance(store, GroupStore) and not store.legacy0x_layout
        # consolidated fragment metadata: checked after the fragments, whose footers it is compared with
        later = set(store.fragment_meta_files()) & set(files) if array else set()
        if len(files) > len(later):
            if not self._idle():
                return done
            store.checked.background(self.level, True)
            _array_level(store, [rel for rel in files if rel not in later])
            done += 1
        if isinstance(store, GroupStore):
            return done
        listing = getattr(store, "fragment_listing", store.fragment_paths)()
        if self._settled.get(id(store)) is listing:
            return done   # the fragments as they were when all of them were checked: no pass over them
        todo = store.checked.unchecked(store, store.fragment_paths(), tiles=self.level == FULL)
        for rel in todo:
            if not self._idle():
                return done
            store.checked.background(self.level, True)
            self._fragment(store, rel)
            done += 1
        if later:
            if not self._idle():
                return done
            _consolidated(store)
            store.checked.mark_files(later)
            done += 1
        if not self._stop.is_set():
            self._settled[id(store)] = listing
        return done

    def _fragment(self, store, rel: str) -> None:
        """work.py's check of one fragment: its metadata (check_head), then with FULL each data tile
        (check_tiles), one tile a unit."""
        from .work import check_head, check_tiles
        from ..store.fragment_interface import streams
        counts = {"fragments": 0, "tiles": 0, "generic_tiles": 0, "files": 0}
        frag = store.fragment(rel)
        md = f"{frag.rel}/{frag.METADATA_FILE}"
        if store.checked.unchecked(store, [rel], tiles=False):
            fields, _ = check_head(store, frag, counts)
            store.checked.mark_fragment(frag, tiles=False)
        else:   # checked before, at the metadata level
            fields = frag.attempt(frag.stored_fields, md, "fields")
        if self.level != FULL:
            return
        for f in fields or ():
            for stream in streams(f):
                ntiles = frag.attempt(lambda f=f: frag.tile_count(f.idx), md, f"tile offsets of {f.stem}") or 0
                for k in range(ntiles):
                    if not self._idle():
                        return
                    check_tiles(store, frag, f, stream, (k, k + 1), counts)
        store.checked.mark_fragment(frag, tiles=True)


def _members(group) -> list:
    from ..store.group_store import Cycle, MemberError
    out = []
    for member in group.members():
        try:
            target = group.member_store(member.shown)
        except MemberError:
            continue
        if not isinstance(target, Cycle):
            out.append(target)
    return out


def _array_level(store, files: list[str]) -> None:
    """check.py's own checks of the array-level files (a group's own files), then marked."""
    from .check import _Checker
    checker = _Checker(store, lambda *a, **k: None)
    if hasattr(store, "details_files"):
        for rel in store.details_files():
            checker._generic_file(store, rel, "group details", store.group_details)
        checker._metadata_files(store)
        store.findings()   # the group's listing: members missing, folders that are not members
    else:
        checker._array_level(store, 0, lambda *a, **k: None)
    store.checked.mark_files(files)


def _consolidated(store) -> None:
    from .check import _Checker
    _Checker(store, lambda *a, **k: None)._consolidated(store, lambda: None)
