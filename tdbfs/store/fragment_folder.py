"""What every kind of fragment folder shares (today's fragments and 0.x ones): its files,
and parsing memoised once per fragment with each failure recorded once as a problem.

A fragment never changes once written, so whatever is parsed from it is kept for the
life of the object.
"""

from __future__ import annotations

import os
import threading

from .problems import ProblemLog


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

    def _once(self, key, make):
        with self._lock:
            if key in self._memo:
                value = self._memo[key]
                if isinstance(value, _Failed):
                    raise value.exc
                return value
        try:
            value = make()
        except FileNotFoundError:
            raise
        except Exception as exc:
            self.problems.add_error(exc, self._file(self.METADATA_FILE), str(key))
            with self._lock:
                self._memo[key] = _Failed(exc)
            raise
        with self._lock:
            self._memo[key] = value
        return value

    def _file(self, name: str) -> str:
        return f"{self.rel}/{name}"

    def files(self) -> list[tuple[str, int]]:
        out = []
        for n in self.store.listdir(self.rel):
            try:
                out.append((n, self.store.file_size(self._file(n))))
            except OSError:
                pass
        return out

    def mtime(self) -> float:
        try:
            return self.store.stat(self.rel).st_mtime
        except OSError:
            return 0.0
