"""Pure decoding of TileDB on-disk structures from bytes: no I/O, no caching, no FUSE."""
