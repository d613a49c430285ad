"""The GZIP reverser reads each zlib stream to its end, so that its Adler-32 checksum is verified as
TileDB's inflate verifies it: damaged deflate data that still inflates to the expected size is a
problem, not a silently different value (found by salvage: TileDB refused a copied .del that
`tdbfs check` passed)."""

from __future__ import annotations

import zlib

import pytest

from tdbfs.format.reversers.compressors import _gzip

DATA = b"tdbfs " * 40


def test_a_whole_stream_decodes():
    assert _gzip(memoryview(zlib.compress(DATA, 1)), len(DATA)) == DATA


def test_a_stream_whose_checksum_fails_is_refused():
    stream = bytearray(zlib.compress(DATA, 1))
    stream[-1] ^= 0x01   # the Adler-32 trailer
    with pytest.raises(zlib.error, match="incorrect data check"):
        _gzip(memoryview(bytes(stream)), len(DATA))


def test_a_stream_longer_than_its_part_says_is_refused():
    from tdbfs.format.reversers.common import StageError
    with pytest.raises(StageError, match="holds more than the 10 bytes expected"):
        _gzip(memoryview(zlib.compress(DATA, 1)), 10)
