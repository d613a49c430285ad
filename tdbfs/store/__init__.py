"""The store: the only code that reads an array's files (see open_array)."""

from .array_store import ArrayStore, NotAnArrayError
from .open_array import open_array

__all__ = ["ArrayStore", "NotAnArrayError", "open_array"]
