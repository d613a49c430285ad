"""TileDB 0.x (Intel-HLS TileDB and GenomicsDB's fork): schema, book-keeping, names, tile codecs.

docs/format-0x.md is the digest these modules follow; every decoder takes bytes and
returns frozen dataclasses, and raises FormatError naming file, structure and offset.
"""
