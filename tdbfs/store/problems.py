"""The store's problem log: every problem found while decoding, each once, in the order found.

Problems themselves are tdbfs.problem.Problem; `problem_of` turns any exception met while building
something into one, so the mount's summaries and `tdbfs check` show the same words.
"""

from __future__ import annotations

import threading

from ..format.errors import FormatError
from ..problem import ERROR, WARNING, Problem, unique
from .storage import NotRegularError

__all__ = ["ERROR", "WARNING", "Problem", "ProblemLog", "problem_of", "unique"]


def problem_of(exc: BaseException, file: str, structure: str) -> Problem:
    """The problem an exception stands for; `file` and `structure` name what was being built when the
    exception does not say itself."""
    if isinstance(exc, FormatError):
        return exc.as_problem()
    if isinstance(exc, NotRegularError):
        return Problem(exc.filename or file, "file", None, exc.strerror)
    if isinstance(exc, FileNotFoundError):
        return Problem(exc.filename if isinstance(exc.filename, str) and exc.filename else file, "file", None,
                       "file missing")
    if isinstance(exc, MemoryError):
        return Problem(file, structure, None, "MemoryError while decoding: a length field is not bounded")
    return Problem(file, structure, None, f"{type(exc).__name__}: {exc}")


class ProblemLog:
    """Problems found by decoding, each once, in the order found."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen: set = set()
        self.items: list[Problem] = []
        self.state = None   # what the owner's files looked like when these were found (fragment_folder.py)

    def add(self, p: Problem) -> None:
        with self._lock:
            if p.key not in self._seen:
                self._seen.add(p.key)
                self.items.append(p)

    def add_error(self, exc: BaseException, file: str = "", structure: str = "") -> Problem:
        p = problem_of(exc, file, structure)
        self.add(p)
        return p

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
            self.items.clear()

    def attempt(self, fn, file: str, structure: str):
        """fn(), or None with its failure recorded here."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 -- every failure becomes a problem, never a crash
            self.add_error(exc, file, structure)
            return None
