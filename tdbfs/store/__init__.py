"""The store: the only code that reads an array's files (see open_array)."""

__all__ = ["ArrayStore", "NotAnArrayError"]


def __getattr__(name):
    # imported on first use: `tdbfs mount` lists folders with store.storage before its daemon is up,
    # without the store's own imports (a quarter of its start-up)
    if name in __all__:
        from . import array_store
        return getattr(array_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
