"""What every kind of fragment folder shares (today's fragments and 0.x ones): its files, and
parsing memoised per fragment with each failure recorded once as a problem.

A committed fragment never changes, so whatever is parsed from it is kept for the life of the
object. A fragment that is not committed yet may still be being written: what is parsed from it
is kept only while its files stay the same (names, sizes, mtimes), and what was found wrong with
it is forgotten when they change, so a fragment read half-written reads whole once committed.
"""

from __future__ import annotations

import os
import threading

from .problems import ProblemLog

COMMITTED = "committed"


class _Failed:
    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


class FragmentFolder:
    METADATA_FILE = ""   # the file a parsing failure is blamed on when it names none itself

    def __init__(self, store, rel: str):
        self.store = store
        self.rel = rel
        self.name = os.path.basename(rel)
        self.problems = ProblemLog()
        self._lock = threading.RLock()
        self._memo: dict = {}
        self._memo_state = None
        self._committed = False
        self._mtime: float | None = None   # kept once committed

    # -- commit state ----------------------------------------------------------------
    def is_committed(self) -> bool:
        raise NotImplementedError

    def signature(self) -> tuple:
        """The folder's entries as they are now: (name, kind, size, mtime_ns) each."""
        return tuple((e.name, e.kind, e.size, e.mtime_ns) for e in self.store.entries(self.rel))

    def _known_committed(self) -> bool:
        """True once a commit marks the fragment (for good: its files never change again)."""
        if not self._committed:
            try:
                self._committed = self.is_committed()
            except Exception:  # noqa: BLE001 -- unreadable commits: the fragment is treated as still changing
                pass
        return self._committed

    def state(self):
        """COMMITTED once a commit marks the fragment, else the folder's signature."""
        return COMMITTED if self._known_committed() else self.signature()

    @property
    def committed(self) -> bool:
        return self.state() == COMMITTED

    def cache_token(self):
        """Part of every cache key of this fragment's decoded data: constant once committed."""
        state = self.state()
        return 0 if state == COMMITTED else hash(state)

    def _refresh(self):
        """Forget what was parsed (and what was found wrong) when the fragment's files changed."""
        state = self.state()
        if state == self._memo_state and state == self.problems.state:
            return state
        with self._lock:
            if state != self._memo_state:
                self._memo.clear()
                self._memo_state = state
            if state != self.problems.state:
                # the log outlives this object (the store keeps it); a log first seen now has nothing to forget
                if self.problems.state is not None:
                    self.problems.clear()
                self.problems.state = state
        return state

    def _once(self, key, make):
        self._refresh()
        with self._lock:
            if key in self._memo:
                value = self._memo[key]
                if isinstance(value, _Failed):
                    raise value.exc
                return value
        try:
            value = make()
        except FileNotFoundError:
            raise  # a missing file is a finding of the folder's listing (findings.py), said once there
        except Exception as exc:
            self.problems.add_error(exc, self._file(self.METADATA_FILE), str(key))
            with self._lock:
                self._memo[key] = _Failed(exc)
            raise
        with self._lock:
            self._memo[key] = value
        return value

    def _known(self, key) -> bool:
        """Whether `key` was made (or failed) for the files as they are now."""
        self._refresh()
        with self._lock:
            return key in self._memo

    def attempt(self, fn, file: str, structure: str):
        """fn(), or None with its failure recorded among this fragment's problems."""
        self._refresh()
        try:
            return fn()
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 -- every failure becomes a problem
            self.problems.add_error(exc, file, structure)
            return None

    def _file(self, name: str) -> str:
        return f"{self.rel}/{name}"

    def files(self) -> list[tuple[str, int]]:
        """(name, size) of the regular files of the folder; other entries are findings, never read."""
        return [(e.name, e.size) for e in self.store.entries(self.rel) if e.is_file]

    def special_entries(self) -> list:
        """Entries of the folder that are not regular files (symlinks, FIFOs, devices, sub-folders)."""
        return [e for e in self.store.entries(self.rel) if not e.is_file]

    def mtime(self) -> float:
        """The folder's mtime: asked once the fragment is committed (its files never change again), at every
        call before. Every stat of the folder and of the folders under it shows it, and `find` makes 80
        requests per fragment."""
        if self._mtime is not None:
            return self._mtime
        committed = self._known_committed()
        t = self.store.mtime(self.rel)
        if committed:
            self._mtime = t
        return t

    def cell_count(self) -> int:
        """Cells in the fragment, from the tile counts both layouts give (store/fragment_interface.py)."""
        n = self.tile_count()
        return 0 if n == 0 else (n - 1) * self.cells_per_full_tile() + self.tile_cell_num(n - 1)
