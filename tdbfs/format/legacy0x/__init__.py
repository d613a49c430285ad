"""TileDB 0.x (Intel-HLS TileDB and GenomicsDB's fork): schema, book-keeping, names, tile codecs.

FORMAT_0x.md is the digest these modules follow; every decoder takes bytes and
returns frozen dataclasses, and raises FormatError naming file, structure and offset.
"""
