"""The store layer: on-demand reading, lazy parsing and bounded caching of one array."""

from .array_store import ArrayStore, NotAnArrayError

__all__ = ["ArrayStore", "NotAnArrayError"]
