"""The problems a store or a fragment has found: each once, in the order found."""

from __future__ import annotations

import threading

from ..format.errors import FormatError


class ProblemLog:
    """Problems found so far, each once, in the order found."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen: set = set()
        self.items: list[dict] = []

    def add(self, problem: dict) -> None:
        key = (problem.get("file"), problem.get("structure"), problem.get("offset"), problem.get("message"))
        with self._lock:
            if key not in self._seen:
                self._seen.add(key)
                self.items.append(problem)

    def add_error(self, exc: Exception, file: str = "", structure: str = "") -> dict:
        if isinstance(exc, FormatError):
            problem = exc.as_problem()
        else:
            problem = {"file": file, "structure": structure, "offset": None, "message": f"{type(exc).__name__}: {exc}"}
        self.add(problem)
        return problem
