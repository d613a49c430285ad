"""Problems: what is wrong with an array, each once, in the order found.

A problem is a mapping with `file` (relative to the array root), `structure`, `offset` (a byte
offset, or None only for a finding about a whole file), `message` and `severity`. The mount's
summaries and `tdbfs check` show the same mappings, made here, so they say the same words.
"""

from __future__ import annotations

import threading

from ..format.errors import FormatError
from .local_files import NotRegularError

ERROR = "error"
#: a state TileDB itself leaves behind or ignores (consolidated but not vacuumed, extra files): reported,
#: but `tdbfs check` still exits 0
WARNING = "warning"


def problem(file: str, structure: str, offset: int | None, message: str, severity: str = ERROR,
            within: str = "") -> dict:
    out = {"file": file, "structure": structure, "offset": offset, "message": message, "severity": severity}
    if within:
        out["within"] = within
    return out


def problem_of(exc: BaseException, file: str, structure: str) -> dict:
    """The problem an exception stands for; `file` and `structure` name what was being built when the
    exception does not say itself."""
    if isinstance(exc, FormatError):
        p = exc.as_problem()
        p.setdefault("severity", ERROR)
        return problem(p["file"], p["structure"], p["offset"], p["message"], p["severity"], p.get("within", ""))
    if isinstance(exc, NotRegularError):
        return problem(exc.filename or file, "file", None, exc.strerror)
    if isinstance(exc, FileNotFoundError):
        return problem(exc.filename if isinstance(exc.filename, str) and exc.filename else file, "file", None,
                       "file missing")
    if isinstance(exc, MemoryError):
        return problem(file, structure, None, "MemoryError while decoding: a length field is not bounded")
    return problem(file, structure, None, f"{type(exc).__name__}: {exc}")


def key_of(p: dict) -> tuple:
    return (p.get("file"), p.get("structure"), p.get("offset"), p.get("message"), p.get("within", ""))


def merged(*lists) -> list[dict]:
    """The problems of several lists, each once, in order."""
    seen: set = set()
    out = []
    for lst in lists:
        for p in lst:
            k = key_of(p)
            if k not in seen:
                seen.add(k)
                out.append(p)
    return out


class ProblemLog:
    """Problems found by decoding, each once, in the order found."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen: set = set()
        self.items: list[dict] = []
        self.state = None   # what the owner's files looked like when these were found (fragment_folder.py)

    def add(self, p: dict) -> None:
        p.setdefault("severity", ERROR)
        key = key_of(p)
        with self._lock:
            if key not in self._seen:
                self._seen.add(key)
                self.items.append(p)

    def add_error(self, exc: BaseException, file: str = "", structure: str = "") -> dict:
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
