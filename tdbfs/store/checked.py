"""How far a store's problem list goes: which structures have been checked whole, by `tdbfs check` or by
a mount's background check (tdbfs/check/background.py), so that array.yaml can say it at the top.

The listings' findings (commit state, missing and extra files, sizes against the footers) are complete
from the first read; what only decoding finds is complete for what is marked here. A mark is made after
the check of its structure is over, so whatever that check found is among the store's problems by then:
array.yaml takes this record before its problem list, and never claims more than the list holds.
"""

from __future__ import annotations

import threading
import time

#: what a mount checks by itself: nothing, every structure but the data tiles, or everything
OFF, METADATA, FULL = "off", "metadata", "full"
LEVELS = (OFF, METADATA, FULL)

#: how often array.yaml takes the marks made meanwhile (`Checked.state`)
STATE_TICK_S = 0.5


class Checked:
    """The record one store keeps; every method is safe from any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._files: set[str] = set()          # array-level files (schemas, metadata, commits, ...)
        # fragment folder -> None (committed when checked: its files never change), or the folder's
        # signature then (a fragment not yet committed counts while its files stay as they were)
        self._metadata: dict[str, tuple | None] = {}
        self._tiles: dict[str, tuple | None] = {}
        self._background = OFF
        self._running = False
        self.version = 0   # changes with every mark
        self._shown = (0, 0.0)   # the version `state` gave last, and when

    # -- marks -------------------------------------------------------------------------------------
    def mark_files(self, rels) -> None:
        with self._lock:
            self._files.update(rels)
            self.version += 1

    def mark_fragment(self, frag, tiles: bool) -> None:
        """The fragment's metadata (and with `tiles`, every data tile too) has been checked."""
        try:
            sig = None if frag.committed else frag.signature()
        except Exception:  # noqa: BLE001 -- a folder that cannot be listed now is checked again later
            return
        with self._lock:
            self._metadata[frag.rel] = sig
            if tiles:
                self._tiles[frag.rel] = sig
            self.version += 1

    def background(self, level: str, running: bool) -> None:
        """What the mount's background check does now (`level` one of LEVELS)."""
        with self._lock:
            if (self._background, self._running) != (level, running):
                self._background, self._running = level, running
                self.version += 1
                self._shown = (self.version, time.monotonic())   # shown at once: "done" is never late

    def state(self):
        """What array.yaml's rendering depends on here: the marks, taken again at most every STATE_TICK_S
        while the check runs. Each mark would otherwise make the next read of array.yaml a whole render
        (of every fragment), and a script polling it would keep the daemon rendering and the check
        waiting. A rendering kept meanwhile says less than is checked, never more; the problems it
        lists are current, since every problem found changes the store's own state."""
        now = time.monotonic()
        with self._lock:
            shown, at = self._shown
            if shown != self.version and (not self._running or now - at >= STATE_TICK_S):
                self._shown = shown, at = self.version, now
            return shown, self._background, self._running

    def forget_except(self, live) -> None:
        """Drop the marks of fragments no longer listed (vacuumed)."""
        live = set(live)
        with self._lock:
            for marks in (self._metadata, self._tiles):
                for gone in set(marks) - live:
                    del marks[gone]

    def unchecked(self, store, paths, tiles: bool) -> list[str]:
        """The fragment folders of `paths` whose metadata (`tiles`: tiles) are not checked as they are now."""
        with self._lock:
            marks = dict(self._tiles if tiles else self._metadata)
        return [rel for rel in paths if not _holds(marks, store, rel)]

    def files_unchecked(self, files) -> list[str]:
        with self._lock:
            return [rel for rel in files if rel not in self._files]

    # -- reading -----------------------------------------------------------------------------------
    def background_state(self) -> str:
        with self._lock:
            level, running = self._background, self._running
        return "not running" if level == OFF else f"{level}, {'running' if running else 'done'}"

    def summary(self, store, files: list[str], paths: list[str]) -> dict:
        """array.yaml's `checked:` for the array-level `files` and fragment folders `paths` listed now."""
        background = self.background_state()
        with self._lock:
            done_files = sum(1 for rel in files if rel in self._files)
            metadata, tiles = dict(self._metadata), dict(self._tiles)
        n = len(paths)
        return {"array_files": f"{done_files} of {len(files)}",
                "metadata": f"{_count(metadata, store, paths)} of {n} fragments",
                "tiles": f"{_count(tiles, store, paths)} of {n} fragments",
                "background": background}


def _count(marks: dict, store, paths) -> int:
    return sum(1 for rel in paths if _holds(marks, store, rel))


def _holds(marks: dict, store, rel: str) -> bool:
    if rel not in marks:
        return False
    sig = marks[rel]
    if sig is None:
        return True
    try:
        return store.fragment(rel).signature() == sig
    except OSError:
        return False


def array_files(store) -> list[str]:
    """The files `tdbfs check` checks at the array level (or a group's own), as listed now."""
    if getattr(store, "legacy0x_layout", None):
        return list(store.schema_files())
    if hasattr(store, "details_files"):   # a group: its details and metadata
        return list(store.details_files()) + [r for r in store.metadata_files() if not r.endswith(".tmp")]
    return (list(store.schema_files()) + list(store.enumeration_files())
            + [r for r in store.metadata_files() if not r.endswith(".tmp")] + list(store.commit_files())
            + list(store.fragment_meta_files()))

