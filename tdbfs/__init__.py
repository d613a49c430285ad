"""tdbfs: a read-only FUSE filesystem that shows a TileDB array's on-disk structures as files."""

__version__ = "0.1.0"
