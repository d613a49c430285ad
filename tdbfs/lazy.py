"""numpy, imported on first use by the modules a mount imports at start-up.

Importing numpy costs 130-250 ms, most of a mount's start-up, while listing `fragments/`
and rendering a `footer.yaml` need none of it (`tests/test_startup.py` keeps it so).
Modules imported only once a tile is decoded import numpy themselves.
"""

from __future__ import annotations

import importlib
import sys


class LazyModule:
    """Stands for a module until an attribute is first asked for; each attribute is then
    kept on the instance, so later lookups cost what a module attribute costs."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value

    def imported(self) -> bool:
        """Whether the module is loaded: until it is, no value can be one of its types, so
        `np.imported() and isinstance(v, np.generic)` asks without importing numpy."""
        return self._name in sys.modules

    def __repr__(self) -> str:
        return f"<lazily imported module {self._name!r}>"


np = LazyModule("numpy")
